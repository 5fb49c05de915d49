//! Lists: client-go's pager over `continue` tokens, into the store whole or, for a store that
//! takes lists in parts, part by part as the pages are decoded.

#[allow(
    clippy::wildcard_imports,
    reason = "a part of the reflector module, with its imports"
)]
use super::*;

impl<K, S> Reflector<K, S>
where
    K: Object,
    S: Store<K> + ?Sized + 'static,
{
    /// Lists everything and replaces the store's contents; `false` when the token fired first.
    /// A store that takes the list in parts takes each part as it is decoded.
    pub(super) async fn list(&self, token: &CancellationToken) -> Result<bool> {
        let resource_version = self.relist_resource_version();
        let started = Instant::now();
        info!(resource_version = %resource_version, "list started");
        let listed = tokio::select! {
            () = token.cancelled() => return Ok(false),
            listed = self.paged_list(resource_version.clone()) => listed,
        };
        let listed = match listed {
            Err(error) if error.is_resource_version_unavailable() => {
                self.set_unavailable(true);
                info!(error = %ErrorChain(&error), reason = "resource version unavailable", "relisting from a consistent read");
                tokio::select! {
                    () = token.cancelled() => return Ok(false),
                    listed = self.paged_list(self.relist_resource_version()) => listed,
                }
            }
            other => other,
        };
        let listed = match listed {
            Ok(listed) => listed,
            Err(error) => {
                debug!(error = %ErrorChain(&error), elapsed = ?started.elapsed(), "list failed");
                self.counters.list_failed();
                // A version seen means the resource was served once: a 404 now means it went away.
                let served_before = !self.versions.read().last_sync.is_empty();
                if self.stop_when_gone && error.is_not_found() && served_before {
                    return Err(Error::ResourceGone {
                        resource: self.type_description.clone(),
                        message: match error {
                            Error::Api { message, .. } => message,
                            other => other.to_string(),
                        },
                    });
                }
                return Err(error);
            }
        };
        if resource_version == "0" && listed.paginated {
            *self.paginated_result.lock() = true;
        }
        self.set_unavailable(false);
        let count = listed.count;
        match listed.parts {
            Some(parts) => self.finish_parts(parts, &listed.resource_version)?,
            None => self.replace_store(listed.items, &listed.resource_version)?,
        }
        self.counters.listed(started.elapsed());
        info!(items = count, resource_version = %listed.resource_version, duration = ?started.elapsed(), "list finished");
        Ok(true)
    }

    /// Ends a list taken in parts, as [`replace_store`](Self::replace_store) does a whole one.
    fn finish_parts(
        &self,
        parts: Box<dyn ListInParts<K> + '_>,
        resource_version: &str,
    ) -> Result<()> {
        let previous = self.last_sync_resource_version();
        self.set_last_sync(resource_version);
        parts.finish(resource_version).map_err(|error| {
            self.versions.write().last_sync = previous;
            Error::from(error)
        })?;
        self.progressed();
        Ok(())
    }

    /// client-go's pager: follows `continue` tokens, and when a continuation page has expired,
    /// lists everything at once at the version first asked for. The objects go to the store
    /// as they are decoded when it takes lists in parts (the result then holds the unfinished
    /// list), else into the result.
    async fn paged_list(&self, resource_version: String) -> Result<Listed<'_, K>> {
        let limit = match self.page_size {
            Some(size) => Some(size),
            None if *self.paginated_result.lock() => Some(DEFAULT_PAGE_SIZE),
            // A list at a known version without a limit can come from the watch cache.
            None if !resource_version.is_empty() && resource_version != "0" => None,
            None => Some(DEFAULT_PAGE_SIZE),
        };
        let first = ListOptions {
            resource_version: Some(resource_version),
            limit,
            ..ListOptions::default()
        };
        let mut options = first.clone();
        let mut listed = Listed {
            items: Vec::new(),
            count: 0,
            resource_version: String::new(),
            paginated: false,
            parts: self.store.replace_in_parts(),
        };
        loop {
            let page = match self.list_page(options.clone(), &mut listed).await {
                Ok(page) => page,
                Err(error @ Error::Expired { .. }) if options.continue_token.is_some() => {
                    info!(error = %ErrorChain(&error), "a continuation page expired, listing everything at once");
                    // The full list is another snapshot: what the store took of this one stays
                    // unless the new list names it, so it is a new list in parts.
                    listed.items = Vec::new();
                    listed.count = 0;
                    if listed.parts.take().is_some() {
                        listed.parts = self.store.replace_in_parts();
                    }
                    let full = ListOptions {
                        limit: None,
                        ..first
                    };
                    let page = self.list_page(full, &mut listed).await?;
                    listed.resource_version = page.resource_version;
                    return Ok(listed);
                }
                Err(error) => return Err(error),
            };
            listed.resource_version.clone_from(&page.resource_version);
            match page.next_page_token() {
                None => return Ok(listed),
                Some(token) => {
                    debug!(items = listed.count, "list page received");
                    listed.paginated = true;
                    options.continue_token = Some(token.to_owned());
                    options.resource_version = None;
                    options.resource_version_match = None;
                }
            }
        }
    }

    /// Lists one page into the store's parts or `listed`.
    async fn list_page(
        &self,
        options: ListOptions,
        listed: &mut Listed<'_, K>,
    ) -> Result<ListPage> {
        let mut sink = IntoListed {
            listed,
            reuse: self.reuse_function(),
        };
        self.lister_watcher.list(options, &mut sink).await
    }

    /// Maps a listed object to the consumer's own copy when it holds one at the same version
    /// (see [`ReflectorOptions::reuse_known_objects`]).
    fn reuse_function(&self) -> Option<Arc<ReuseObject<K>>> {
        let known_object = self.known_object.clone()?;
        Some(Arc::new(move |listed: Arc<K>| {
            reusable(&known_object, &listed).unwrap_or(listed)
        }))
    }
}

/// What a list brought: its objects unless a store took them in parts, how many, and at which
/// version.
struct Listed<'a, K> {
    items: Vec<Arc<K>>,
    count: usize,
    resource_version: String,
    /// Whether it took more than one page.
    paginated: bool,
    /// The store's list in parts, to finish once the list is complete.
    parts: Option<Box<dyn ListInParts<K> + 'a>>,
}

/// The consumer's copy of `listed`, when it has one at the same non-empty resourceVersion.
pub(super) fn reusable<K: Object>(
    known_object: &KnownObject<K>,
    listed: &Arc<K>,
) -> Option<Arc<K>> {
    let version = listed
        .resource_version()
        .filter(|version| !version.is_empty())?;
    known_object(listed).filter(|known| known.resource_version() == Some(version))
}

/// Hands listed parts to a store that takes them, each once the store is ready for it, or
/// collects them for a store that takes lists whole (without their bytes: a whole replace
/// takes objects alone).
struct IntoListed<'a, 'b, K> {
    listed: &'a mut Listed<'b, K>,
    reuse: Option<Arc<ReuseObject<K>>>,
}

#[async_trait::async_trait]
impl<K: Send + Sync + 'static> ListSink<K> for IntoListed<'_, '_, K> {
    async fn part(&mut self, items: Vec<Incoming<K>>) -> Result<()> {
        let listed = &mut *self.listed;
        listed.count += items.len();
        let reuse = self.reuse.as_deref();
        match &mut listed.parts {
            Some(parts) => {
                parts.ready().await;
                let items = match reuse {
                    Some(reuse) => items.into_iter().map(|item| reused(item, reuse)).collect(),
                    None => items,
                };
                parts.part(items).map_err(Error::from)
            }
            None => {
                listed.items.extend(items.into_iter().map(|item| {
                    let object = item.into_parts().0;
                    match reuse {
                        Some(reuse) => reuse(object),
                        None => object,
                    }
                }));
                Ok(())
            }
        }
    }
}

/// `incoming` with its object mapped by `reuse`; the bytes go with a replaced object.
fn reused<K>(incoming: Incoming<K>, reuse: &ReuseObject<K>) -> Incoming<K> {
    let (object, encoded) = incoming.into_parts();
    let kept = reuse(Arc::clone(&object));
    if Arc::ptr_eq(&kept, &object) {
        Incoming::new(kept, encoded)
    } else {
        kept.into()
    }
}
