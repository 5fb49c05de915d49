//! Nothing here: the package exists for its tests (`tests/minor.rs`), which build kinformer as
//! an application does, with the Kubernetes minor chosen by a feature.
