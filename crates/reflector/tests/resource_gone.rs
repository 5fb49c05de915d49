//! A resource that stops being served (its CRD deleted), over kube-client against
//! kinformer-testing's API server: a reflector asked to stops once with `ResourceGone`; one
//! not asked retries for ever, as client-go's does; and a 404 before the resource was ever
//! served is retried either way, since a CRD may not be established yet.

use std::{sync::Arc, time::Duration};

use kinformer_reflector::{Error, KubeListerWatcher, Reflector, ReflectorExit, ReflectorOptions};
use kinformer_store::{Cache, CacheReader};
use kinformer_testing::{FakeApiServer, eventually, fixtures};
use kinformer_wait::ExponentialBackoffManager;
use kube_client::{Api, Client, Config};
use kube_core::{ApiResource, DynamicObject, GroupVersionKind};
use parking_lot::Mutex;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(20);

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// A reflector of Widgets, its errors as `Debug` strings, and its task.
struct Running {
    reflector: Arc<Reflector<DynamicObject, Cache<DynamicObject>>>,
    cache: Arc<Cache<DynamicObject>>,
    errors: Arc<Mutex<Vec<String>>>,
    token: CancellationToken,
    task: JoinHandle<ReflectorExit>,
}

impl Running {
    fn not_found_errors(&self) -> usize {
        self.errors
            .lock()
            .iter()
            .filter(|error| error.contains("code: 404"))
            .count()
    }
}

fn start(server: &FakeApiServer, options: ReflectorOptions<DynamicObject>) -> Running {
    let mut config = Config::new(server.url().parse().expect("the server URL parses"));
    config.default_retry = false;
    let client = Client::try_from(config).expect("a client");
    let resource = widgets();
    let lister_watcher = KubeListerWatcher::dynamic(Api::all_with(client, &resource), &resource);
    let errors = Arc::new(Mutex::new(Vec::new()));
    let options = options
        .backoff(ExponentialBackoffManager::new(
            Duration::from_millis(20),
            Duration::from_millis(200),
            Duration::from_secs(2),
            2.0,
            0.0,
        ))
        .watch_error_handler({
            let errors = Arc::clone(&errors);
            move |error: &Error| errors.lock().push(format!("{error:?}"))
        });
    let cache = Arc::new(Cache::default());
    let reflector = Arc::new(Reflector::new(lister_watcher, Arc::clone(&cache), options));
    let token = CancellationToken::new();
    let task = tokio::spawn({
        let (reflector, token) = (Arc::clone(&reflector), token.clone());
        async move { reflector.run(token).await }
    });
    Running {
        reflector,
        cache,
        errors,
        token,
        task,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reflector_asked_to_stops_once_its_resource_is_gone_and_another_keeps_retrying() {
    let server = FakeApiServer::start()
        .await
        .expect("the fake server starts");
    let stopping = start(
        &server,
        ReflectorOptions::default().stop_when_resource_gone(),
    );
    let retrying = start(&server, ReflectorOptions::default());

    // Not served yet: both retry, the stopping one included.
    eventually(
        "both retry the 404 of a resource never served",
        PATIENCE,
        || stopping.not_found_errors() >= 2 && retrying.not_found_errors() >= 2,
    )
    .await;
    assert!(!stopping.task.is_finished());

    server
        .create_object(fixtures::widget_crd("example.com"))
        .expect("the CRD");
    server
        .create_object(fixtures::widget("example.com", "default", "w", 1))
        .expect("a widget");
    eventually("both list the widget", PATIENCE, || {
        stopping.cache.list().len() == 1 && retrying.cache.list().len() == 1
    })
    .await;

    server
        .delete_object(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "widgets.example.com",
        )
        .expect("the CRD is deleted");
    let exit = tokio::time::timeout(PATIENCE, stopping.task)
        .await
        .expect("the reflector stops by itself")
        .expect("the reflector does not panic");
    assert_eq!(exit, ReflectorExit::ResourceGone);
    assert!(stopping.reflector.is_resource_gone());
    let gone: Vec<String> = stopping
        .errors
        .lock()
        .iter()
        .filter(|error| error.starts_with("ResourceGone"))
        .cloned()
        .collect();
    assert_eq!(gone.len(), 1, "reported once: {gone:?}");
    assert!(gone[0].contains("example.com/v1/Widget"), "{gone:?}");

    let before = retrying.not_found_errors();
    eventually("the other keeps retrying", PATIENCE, || {
        retrying.not_found_errors() >= before + 2
    })
    .await;
    assert!(!retrying.reflector.is_resource_gone());
    retrying.token.cancel();
    let exit = tokio::time::timeout(PATIENCE, retrying.task)
        .await
        .expect("a cancelled reflector stops")
        .expect("the reflector does not panic");
    assert_eq!(exit, ReflectorExit::Cancelled);
    drop(stopping.token);
}
