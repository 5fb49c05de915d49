//! kinformer leaves the Kubernetes minor to the application. Built with `--features v1_33` (the
//! earliest minor k8s-openapi 0.29 supports) or `--features v1_37`, the umbrella compiles, an
//! informer syncs from the fake API server, and protobuf written from the 1.37 API decodes into
//! the chosen minor's types: fields an older minor lacks are skipped, not errors. The decoders
//! generated per type exist for 1.37 alone; on 1.33 every type takes the serde path. `.ci/run`
//! builds 1.33 without the umbrella's `simd-json` feature and 1.37 with it, so the JSON informer
//! below runs on both of the reflector's JSON paths.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kinformer::prelude::*;
use kinformer::{reflector::WireFormat};
use kinformer::testing::FakeApiServer;
use kinformer_protobuf::{DecodeOptions, Decoder, Envelope, encode_object};
use serde_json::json;

/// A Pod as a 1.37 kube-apiserver serves it: `spec.hostnameOverride` (1.34) and a container's
/// `restartPolicyRules` (1.34) are unknown to the 1.33 types.
fn pod_from_a_newer_server() -> serde_json::Value {
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": { "name": "web-0", "namespace": "shop", "labels": { "app": "web" } },
        "spec": {
            "hostnameOverride": "web-zero",
            "nodeName": "node-1",
            "containers": [{
                "name": "web",
                "image": "nginx:1.27",
                "restartPolicy": "Always",
                "restartPolicyRules": [{
                    "action": "Restart",
                    "exitCodes": { "operator": "In", "values": [42] },
                }],
            }],
        },
        "status": { "phase": "Running" },
    })
}

#[test]
fn protobuf_from_the_newest_api_decodes_into_this_minors_types() {
    let body = encode_object(&pod_from_a_newer_server()).expect("encodes");
    let envelope = Envelope::parse(&body).expect("an envelope");
    let pod: Pod = envelope.decode(DecodeOptions::default()).expect("decodes");

    assert_eq!(pod.metadata.name.as_deref(), Some("web-0"));
    let spec = pod.spec.expect("spec");
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.27"));
    assert_eq!(pod.status.and_then(|s| s.phase).as_deref(), Some("Running"));
    k8s_openapi::k8s_if_ge_1_34! {
        assert_eq!(spec.hostname_override.as_deref(), Some("web-zero"));
        assert_eq!(spec.containers[0].restart_policy_rules.as_ref().map(Vec::len), Some(1));
    }
}

#[test]
fn the_generated_decoder_exists_for_its_own_minor_and_agrees_with_serde() {
    let body = encode_object(&pod_from_a_newer_server()).expect("encodes");
    let envelope = Envelope::parse(&body).expect("an envelope");
    let decoder = Decoder::<Pod>::new();
    let generated_here = cfg!(feature = "v1_37");
    assert_eq!(decoder.is_generated(), generated_here);
    let fast = decoder
        .decode_envelope(&envelope, DecodeOptions::default())
        .expect("decodes");
    let serde = Decoder::<Pod>::serde()
        .decode_envelope(&envelope, DecodeOptions::default())
        .expect("decodes");
    assert_eq!(fast, serde);
}

#[tokio::test]
async fn an_informer_syncs_from_the_fake_server_on_this_minor() {
    syncs_three_pods(FactoryOptions::default()).await;
}

/// The same in JSON, the format custom resources have: with the `simd-json` feature objects take
/// simd-json where it agrees with serde_json, without it serde_json reads them all.
#[tokio::test]
async fn an_informer_syncs_in_json_on_this_minor() {
    syncs_three_pods(FactoryOptions::default().wire_format(WireFormat::Json)).await;
}

/// Three Pods from a newer server synced by a factory built with `options`, read back whole.
async fn syncs_three_pods(options: FactoryOptions) {
    let server = FakeApiServer::start().await.expect("fake API server");
    for i in 0..3 {
        let mut pod = pod_from_a_newer_server();
        pod["metadata"]["name"] = json!(format!("web-{i}"));
        server.create_object(pod).expect("created");
    }
    let factory = SharedInformerFactory::new(server.client().expect("client"), options);
    let pods = factory.informer::<Pod>().expect("informer");
    factory.start().expect("started");
    let synced = factory.wait_for_cache_sync(Duration::from_secs(60)).await;
    assert!(synced.all_synced(), "{synced}");
    assert!(pods.has_synced());

    let lister = factory.lister::<Pod>().expect("lister").namespaced("shop");
    assert_eq!(lister.list(&Default::default()).len(), 3);
    let web_1 = lister.get("web-1").expect("web-1 is cached");
    let spec = web_1.spec.as_ref().expect("a spec");
    assert_eq!(spec.node_name.as_deref(), Some("node-1"));
    assert_eq!(spec.containers[0].image.as_deref(), Some("nginx:1.27"));
    factory.shutdown().await;
}
