//! Realistic objects for tests, examples and benchmarks.
//!
//! [`pod`] builds a Pod of about 6 KB of JSON, close to what a Deployment's Pod weighs on a real
//! cluster (labels, owner reference, managedFields, two containers, full status), spread over
//! [`NAMESPACES`] namespaces. Objects carry no uid or resourceVersion: the server assigns them.

use serde_json::{Value, json};

/// How many namespaces fixtures are spread over (`ns-0` ... `ns-9`).
pub const NAMESPACES: usize = 10;

/// The namespace fixture `i` lives in.
pub fn namespace_of(i: usize) -> String {
    format!("ns-{}", i % NAMESPACES)
}

/// A Namespace object named `name`.
pub fn namespace(name: &str) -> Value {
    json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name, "labels": { "kubernetes.io/metadata.name": name } } })
}

fn managed_field(
    manager: &str,
    operation: &str,
    subresource: Option<&str>,
    fields: &Value,
) -> Value {
    let mut entry = json!({
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": "2026-01-01T00:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    });
    if let Some(sub) = subresource {
        entry["subresource"] = json!(sub);
    }
    entry
}

fn container(name: &str, image: &str, port: u64) -> Value {
    json!({
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--port", port.to_string(), "--log-level", "info", "--metrics-bind-address", ":9090"],
        "env": [
            { "name": "POD_NAME", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.name" } } },
            { "name": "POD_NAMESPACE", "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": "metadata.namespace" } } },
            { "name": "GOMAXPROCS", "value": "2" },
        ],
        "ports": [
            { "name": "http", "containerPort": port, "protocol": "TCP" },
            { "name": "metrics", "containerPort": 9090, "protocol": "TCP" },
        ],
        "resources": {
            "limits": { "cpu": "500m", "memory": "256Mi" },
            "requests": { "cpu": "100m", "memory": "128Mi" },
        },
        "livenessProbe": {
            "httpGet": { "path": "/healthz", "port": port, "scheme": "HTTP" },
            "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10,
            "successThreshold": 1, "failureThreshold": 3,
        },
        "readinessProbe": {
            "httpGet": { "path": "/readyz", "port": port, "scheme": "HTTP" },
            "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3,
        },
        "volumeMounts": [
            { "name": "config", "mountPath": "/etc/app", "readOnly": true },
            { "name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true },
        ],
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "securityContext": { "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true },
    })
}

/// Pod number `i`: `pod-{i}` in [`namespace_of`]`(i)`, owned by a ReplicaSet, on node `node-{i % 50}`.
pub fn pod(i: usize) -> Value {
    let app = format!("app-{}", i % 20);
    let hash = format!(
        "{:010x}",
        (i as u64 / 20).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24
    );
    let rs = format!("{app}-{}", &hash[..8]);
    let node = format!("node-{}", i % 50);
    let ip = format!("10.{}.{}.{}", (i >> 16) & 0xff, (i >> 8) & 0xff, i & 0xff);
    let condition = |kind: &str| json!({ "type": kind, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-01-01T00:00:05Z" });
    let container_status = |name: &str, image: &str| {
        json!({
            "name": name,
            "state": { "running": { "startedAt": "2026-01-01T00:00:03Z" } },
            "lastState": {},
            "ready": true,
            "restartCount": 0,
            "image": image,
            "imageID": format!("{image}@sha256:4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"),
            "containerID": format!("containerd://{:064x}", (i as u128) * 7919 + name.len() as u128),
            "started": true,
        })
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("pod-{i}"),
            "namespace": namespace_of(i),
            "generateName": format!("{rs}-"),
            "labels": {
                "app.kubernetes.io/name": app,
                "app.kubernetes.io/instance": format!("{app}-prod"),
                "app.kubernetes.io/part-of": "kinformer-bench",
                "pod-template-hash": &hash[..8],
                "tier": if i.is_multiple_of(3) { "frontend" } else { "backend" },
            },
            "annotations": {
                "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
                "prometheus.io/scrape": "true",
                "prometheus.io/port": "9090",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": rs,
                "uid": format!("6a1c1e2b-0000-4000-8000-{:012x}", i / 20),
                "controller": true,
                "blockOwnerDeletion": true,
            }],
            "managedFields": [
                managed_field("kube-controller-manager", "Update", None, &json!({
                    "f:metadata": { "f:generateName": {}, "f:labels": { ".": {}, "f:app.kubernetes.io/name": {}, "f:pod-template-hash": {} },
                        "f:ownerReferences": { ".": {}, "k:{\"uid\":\"6a1c1e2b\"}": {} } },
                    "f:spec": { "f:containers": { "k:{\"name\":\"app\"}": { ".": {}, "f:image": {}, "f:name": {}, "f:ports": {} } },
                        "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:terminationGracePeriodSeconds": {} },
                })),
                managed_field("kubelet", "Update", Some("status"), &json!({
                    "f:status": { "f:conditions": { "k:{\"type\":\"Ready\"}": { ".": {}, "f:status": {}, "f:type": {} } },
                        "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {}, "f:podIPs": {}, "f:startTime": {} },
                })),
            ],
        },
        "spec": {
            "containers": [
                container("app", "registry.example.com/team/app:v1.42.0", 8080),
                container("sidecar", "registry.example.com/infra/proxy:v2.3.1", 15001),
            ],
            "volumes": [
                { "name": "config", "configMap": { "name": format!("{app}-config"), "defaultMode": 420 } },
                { "name": "kube-api-access", "projected": { "defaultMode": 420, "sources": [
                    { "serviceAccountToken": { "expirationSeconds": 3607, "path": "token" } },
                    { "configMap": { "name": "kube-root-ca.crt", "items": [{ "key": "ca.crt", "path": "ca.crt" }] } },
                ] } },
            ],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "nodeName": node,
            "securityContext": { "runAsUser": 1000, "fsGroup": 2000 },
            "schedulerName": "default-scheduler",
            "tolerations": [
                { "key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
                { "key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300 },
            ],
            "priority": 0,
            "enableServiceLinks": true,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {
            "phase": "Running",
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"), condition("ContainersReady"), condition("PodScheduled")],
            "hostIP": format!("192.168.{}.{}", (i % 50) / 250, i % 50 + 1),
            "hostIPs": [{ "ip": format!("192.168.0.{}", i % 50 + 1) }],
            "podIP": ip,
            "podIPs": [{ "ip": ip }],
            "startTime": "2026-01-01T00:00:01Z",
            "containerStatuses": [
                container_status("app", "registry.example.com/team/app:v1.42.0"),
                container_status("sidecar", "registry.example.com/infra/proxy:v2.3.1"),
            ],
            "qosClass": "Burstable",
        },
    })
}

/// ConfigMap number `i`: `config-{i}` in [`namespace_of`]`(i)` with a few small keys.
pub fn config_map(i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": format!("config-{i}"),
            "namespace": namespace_of(i),
            "labels": { "app.kubernetes.io/name": format!("app-{}", i % 20) },
        },
        "data": {
            "log-level": "info",
            "feature-flags": "a=true,b=false",
            "settings.yaml": format!("replicas: {}\ntimeout: 30s\nendpoint: http://svc-{}.svc:8080\n", i % 5 + 1, i % 20),
        },
    })
}

/// A namespaced `Widget` CustomResourceDefinition in `group` (`widgets.{group}`, version
/// `v1`, served and stored, any `spec` accepted), as tests of dynamic informers need one.
pub fn widget_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": format!("widgets.{group}") },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": { "plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList" },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": { "spec": { "type": "object", "x-kubernetes-preserve-unknown-fields": true } },
                } },
            }],
        },
    })
}

/// A `Widget` of [`widget_crd`]`(group)` named `name` in `namespace`, with `spec.size`.
pub fn widget(group: &str, namespace: &str, name: &str, size: u64) -> Value {
    json!({
        "apiVersion": format!("{group}/v1"),
        "kind": "Widget",
        "metadata": { "namespace": namespace, "name": name },
        "spec": { "size": size },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_pod_weighs_between_five_and_seven_kilobytes() {
        let size = serde_json::to_vec(&pod(12_345))
            .map(|v| v.len())
            .unwrap_or(0);
        assert!((5_000..=7_000).contains(&size), "pod is {size} bytes");
    }

    #[test]
    fn fixture_pods_deserialize_as_k8s_openapi_pods() {
        let pod: k8s_openapi::api::core::v1::Pod =
            serde_json::from_value(pod(3)).expect("a valid Pod");
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns-3"));
    }
}
