//! Streaming lists (`sendInitialEvents=true`): the initial state as watch events into a scratch
//! cache, swapped into the store at the initial-events-end bookmark.

#[allow(
    clippy::wildcard_imports,
    reason = "a part of the reflector module, with its imports"
)]
use super::{list::reusable, *};

impl<K, S> Reflector<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    /// Streams the initial state (`sendInitialEvents=true`) into a scratch cache, replaces the
    /// store with it at the initial-events-end bookmark, and hands back the still-open watch.
    /// `None` when the token fired first.
    pub(super) async fn watch_list(
        &self,
        token: &CancellationToken,
    ) -> Result<Option<OpenWatch<K>>> {
        loop {
            if token.is_cancelled() {
                return Ok(None);
            }
            let timeout = self.watch_timeout();
            let options = ListOptions {
                resource_version: Some(self.rewatch_resource_version()),
                resource_version_match: Some(VersionMatch::NotOlderThan),
                timeout_seconds: Some(u32::try_from(timeout.as_secs()).unwrap_or(u32::MAX)),
                allow_watch_bookmarks: true,
                send_initial_events: true,
                ..ListOptions::default()
            };
            let started = Instant::now();
            let deadline = started + timeout + WATCH_IDLE_GRACE;
            info!(resource_version = ?options.resource_version, "streaming list started");
            let opened = tokio::select! {
                () = token.cancelled() => return Ok(None),
                opened = self.lister_watcher.watch(options) => opened,
            };
            let mut stream = match opened {
                Ok(stream) => stream,
                Err(error) => {
                    if self.retry_watch_list(&error, token).await {
                        continue;
                    }
                    if token.is_cancelled() {
                        return Ok(None);
                    }
                    return Err(error);
                }
            };
            let scratch = Cache::<K>::default();
            let mut version = String::new();
            let failure = loop {
                let item = tokio::select! {
                    () = token.cancelled() => return Ok(None),
                    () = tokio::time::sleep_until(deadline) => break Error::WatchIdle { idle: started.elapsed() },
                    item = stream.next() => item,
                };
                let applied = match item {
                    None => break Error::WatchListIncomplete,
                    Some(Err(error @ Error::WrongKind { .. })) => Err(error),
                    Some(Err(error)) => break error,
                    Some(Ok(WatchEvent::Added(object) | WatchEvent::Modified(object))) => {
                        // The scratch cache is replaced into the store whole, as objects alone.
                        let object = object.into_parts().0;
                        if let Some(object_version) = object.resource_version() {
                            object_version.clone_into(&mut version);
                        }
                        let object = match &self.known_object {
                            Some(known_object) => reusable(known_object, &object).unwrap_or(object),
                            None => object,
                        };
                        scratch.update(object.into()).map_err(Error::from)
                    }
                    Some(Ok(WatchEvent::Deleted(object))) => {
                        if let Some(object_version) = object.resource_version() {
                            object_version.clone_into(&mut version);
                        }
                        scratch.delete(object).map_err(Error::from)
                    }
                    Some(Ok(WatchEvent::Bookmark {
                        resource_version,
                        initial_events_end,
                    })) => {
                        version = resource_version;
                        if initial_events_end {
                            self.set_unavailable(false);
                            let items = scratch.list();
                            drop(scratch);
                            let count = items.len();
                            self.replace_store(items, &version)?;
                            self.counters.listed(started.elapsed());
                            info!(items = count, resource_version = %version, duration = ?started.elapsed(), "streaming list finished");
                            return Ok(Some(OpenWatch {
                                stream,
                                started,
                                deadline,
                            }));
                        }
                        Ok(())
                    }
                };
                if let Err(error) = applied {
                    self.report(&error);
                }
            };
            if self.retry_watch_list(&failure, token).await {
                continue;
            }
            if token.is_cancelled() {
                return Ok(None);
            }
            return Err(failure);
        }
    }

    /// Whether a failed streaming list should be tried again: after a backoff for 429 and refused
    /// connections, at once from a consistent read for an unusable version. `false` also when
    /// the token fired during the backoff.
    async fn retry_watch_list(&self, error: &Error, token: &CancellationToken) -> bool {
        if error.is_retriable_without_relist() {
            self.report(error);
            return self
                .back_off(token, error.retry_after(), "before streaming again")
                .await;
        }
        if error.is_resource_version_unavailable() {
            info!(error = %ErrorChain(&error), reason = "resource version unavailable", "streaming again from a consistent read");
            self.set_unavailable(true);
            return true;
        }
        false
    }
}
