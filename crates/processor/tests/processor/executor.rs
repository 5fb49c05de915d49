//! `HandlerExecutor::Tasks`: handlers as tokio tasks. On a current-thread runtime with the
//! clock paused everything the processor does runs on the test's own thread, so each step is
//! awaited, never waited for: a yield lets every woken task run, and virtual time moves only
//! when all of them are idle.

use crate::common;

use std::{sync::Arc, time::Duration};

use common::{Recorder, obj};
use kinformer_processor::{
    HandlerExecutor, HandlerFuncs, ListenerOptions, Notification, ProcessorOptions, Recipients,
    SharedProcessor,
};
use tokio_util::sync::CancellationToken;

fn on_tasks() -> SharedProcessor<String> {
    SharedProcessor::new(ProcessorOptions::default().handler_executor(HandlerExecutor::Tasks))
}

/// Lets every task the last step woke run to its next await.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn handlers_on_tasks_see_every_notification_in_order_and_survive_panics() {
    let processor = on_tasks();
    let (steady, panicky) = (Recorder::new(), Recorder::new());
    processor
        .add_handler(steady.clone(), ListenerOptions::new().name("steady"))
        .expect("added");
    let panicky_registration = processor
        .add_handler(
            {
                let seen = panicky.clone();
                HandlerFuncs::new().add_func(move |obj: Arc<String>, _| {
                    assert_ne!(obj.as_str(), "3", "this handler fails on 3");
                    seen.push(format!("add {obj}"));
                })
            },
            ListenerOptions::new().name("panicky"),
        )
        .expect("added");
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (processor, token) = (processor.clone(), token.clone());
        async move { processor.run(token).await }
    });
    settle().await;
    for n in 0..6 {
        processor.distribute(Notification::add(obj(&n.to_string())), Recipients::All);
    }
    settle().await;
    let all: Vec<String> = (0..6).map(|n| format!("add {n}")).collect();
    assert_eq!(steady.lines(), all);
    let without_three: Vec<String> = all
        .iter()
        .filter(|line| *line != "add 3")
        .cloned()
        .collect();
    assert_eq!(panicky.lines(), without_three);
    assert_eq!(panicky_registration.stats().panicked, 1);
    assert_eq!(panicky_registration.stats().delivered, 6);

    token.cancel();
    running.await.expect("no panic").expect("the processor ran");
}

#[tokio::test(start_paused = true)]
async fn a_handler_added_while_running_starts_on_the_runtime_and_removal_ends_its_task() {
    let processor = on_tasks();
    let token = CancellationToken::new();
    let running = tokio::spawn({
        let (processor, token) = (processor.clone(), token.clone());
        async move { processor.run(token).await }
    });
    settle().await;
    assert!(processor.is_running());
    // Added from a plain thread, outside the runtime: the task goes on the processor's.
    let late = Recorder::new();
    let registration = std::thread::spawn({
        let (processor, late) = (processor.clone(), late.clone());
        move || processor.add_handler(late, ListenerOptions::new().name("late"))
    })
    .join()
    .expect("no panic")
    .expect("added");
    processor.distribute(Notification::add(obj("a")), Recipients::All);
    settle().await;
    assert_eq!(late.lines(), ["add a"]);

    registration.remove();
    let stopped = tokio::time::timeout(Duration::from_secs(1), registration.stopped()).await;
    assert!(
        stopped.is_ok(),
        "the handler's task ended with its registration"
    );
    processor.distribute(Notification::add(obj("b")), Recipients::All);
    settle().await;
    assert_eq!(
        late.lines(),
        ["add a"],
        "a removed handler receives nothing"
    );

    token.cancel();
    running.await.expect("no panic").expect("the processor ran");
}
