//! Waiting, retrying and backing off, on tokio: the runtime helpers every kinformer loop uses.
//!
//! (Being built; see issue 2.)
