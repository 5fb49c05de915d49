//! A watch body cut into frames, and the frames decoded in the order they arrived: on the task
//! that reads the body, or up to N at a time on the runtime's worker threads.

use std::{collections::VecDeque, sync::Arc};

use bytes::{Bytes, BytesMut};
use futures::{FutureExt, Stream, StreamExt, stream::BoxStream};

use crate::{Error, Framing, Result};

/// The longest JSON watch line accepted, as long as the longest protobuf frame
/// (`kinformer_protobuf::MAX_FRAME_LEN`): far beyond any object the API server stores (etcd
/// refuses values over 1.5 MiB by default), so only a broken or hostile stream reaches it.
pub const MAX_WATCH_LINE: usize = kinformer_protobuf::MAX_FRAME_LEN;

/// Decode workers when none are asked for where there is a second core.
const DEFAULT_DECODE_WORKERS: usize = 4;

/// Decode workers when none are asked for: [`DEFAULT_DECODE_WORKERS`] beside the reading task
/// where there is a second core for them, none otherwise.
pub(super) fn default_decode_workers() -> usize {
    // Asking costs system calls (cgroup files), so it is asked once.
    static WORKERS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *WORKERS.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        if cores >= 2 {
            DEFAULT_DECODE_WORKERS
        } else {
            0
        }
    })
}

/// Cuts a watch body into the frames its decoder reads.
enum Frames {
    /// Newline-delimited JSON: the bytes of the line in progress, and how many of them are
    /// known to hold no newline (so a long line split over many chunks is scanned once).
    Lines {
        buffer: BytesMut,
        scanned: usize,
        max: usize,
    },
    LengthPrefixed(kinformer_protobuf::FrameReader),
}

/// The frames of a watch body, each a whole event still encoded; a broken body ends with its
/// error.
struct Framer {
    chunks: BoxStream<'static, Result<Bytes>>,
    frames: Frames,
    ready: VecDeque<Result<Bytes>>,
    finished: bool,
}

impl Framer {
    fn push_line(&mut self, line: BytesMut) {
        let line = line.freeze();
        let trimmed = line.trim_ascii();
        if !trimmed.is_empty() {
            self.ready.push_back(Ok(line.slice_ref(trimmed)));
        }
    }

    fn take_complete_frames(&mut self, chunk: &[u8]) {
        match &mut self.frames {
            Frames::Lines {
                buffer,
                scanned,
                max,
            } => {
                let max = *max;
                buffer.extend_from_slice(chunk);
                let mut lines = Vec::new();
                while let Some(end) = memchr::memchr(b'\n', &buffer[*scanned..]) {
                    lines.push(buffer.split_to(*scanned + end + 1));
                    *scanned = 0;
                }
                *scanned = buffer.len();
                let too_long = buffer.len() > max;
                let head = too_long.then(|| std::mem::take(buffer));
                for line in lines {
                    self.push_line(line);
                }
                if let Some(head) = head {
                    // Never buffer without bound: the stream ends, and the reflector relists.
                    self.finished = true;
                    let reason = format!("a watch line longer than {max} bytes without a newline");
                    let head = &head[..head.len().min(4096)];
                    self.ready
                        .push_back(Err(Error::decode("watch event", reason, head)));
                }
            }
            Frames::LengthPrefixed(reader) => {
                reader.push(chunk);
                loop {
                    match reader.next_frame() {
                        Ok(Some(frame)) => self.ready.push_back(Ok(frame)),
                        Ok(None) => break,
                        Err(error) => {
                            // A corrupt length cannot be resynchronised: end the stream.
                            self.finished = true;
                            self.ready.push_back(Err(Error::decode(
                                "watch frame",
                                format!("protobuf: {error}"),
                                &[],
                            )));
                            break;
                        }
                    }
                }
            }
        }
    }

    fn finish(&mut self) {
        self.finished = true;
        match &mut self.frames {
            Frames::Lines { buffer, .. } => {
                let rest = std::mem::take(buffer);
                self.push_line(rest);
            }
            Frames::LengthPrefixed(reader) => {
                if reader.pending() > 0 {
                    tracing::debug!(
                        bytes = reader.pending(),
                        "a protobuf watch stream ended inside a frame"
                    );
                }
            }
        }
    }

    fn into_stream(self) -> impl Stream<Item = Result<Bytes>> + Send + 'static {
        futures::stream::unfold(self, |mut framer| async move {
            loop {
                if let Some(frame) = framer.ready.pop_front() {
                    return Some((frame, framer));
                }
                if framer.finished {
                    return None;
                }
                match framer.chunks.next().await {
                    Some(Ok(chunk)) => framer.take_complete_frames(&chunk),
                    Some(Err(error)) => {
                        framer.finished = true;
                        framer.ready.push_back(Err(error));
                    }
                    None => framer.finish(),
                }
            }
        })
    }
}

/// Cuts a watch body into frames and decodes each with `decode` (an event, or an event and its
/// object's bytes), handing them on in the order their frames arrived; a broken body ends the
/// stream with its error.
///
/// With `workers` at 0 each frame is decoded on the task that polls the stream. Otherwise up to
/// `workers` frames ahead of the one handed on are decoded at once, each on a task of its own, so
/// decoding runs beside the I/O and beside whatever consumes the events.
pub(super) fn watch_events<T, D>(
    chunks: BoxStream<'static, Result<Bytes>>,
    decoder: Arc<D>,
    decode: fn(&D, &[u8], Framing) -> Result<T>,
    framing: Framing,
    max_line: usize,
    workers: usize,
) -> BoxStream<'static, Result<T>>
where
    T: Send + 'static,
    D: Send + Sync + 'static,
{
    let frames = match framing {
        Framing::LengthPrefixed => {
            Frames::LengthPrefixed(kinformer_protobuf::FrameReader::default())
        }
        _ => Frames::Lines {
            buffer: BytesMut::new(),
            scanned: 0,
            max: max_line,
        },
    };
    let frames = Framer {
        chunks,
        frames,
        ready: VecDeque::new(),
        finished: false,
    }
    .into_stream();
    // The workers run on the runtime the watch was opened on, wherever the stream is polled;
    // outside a tokio runtime there is none, and frames decode where they are read.
    let runtime = tokio::runtime::Handle::try_current().ok();
    let Some(runtime) = runtime.filter(|_| workers > 0) else {
        return frames
            .map(move |frame| decode(&decoder, &frame?, framing))
            .boxed();
    };
    frames
        .map(move |frame| {
            let decoder = Arc::clone(&decoder);
            let decoded = frame.map(|frame| {
                runtime
                    .spawn(async move { decode(&decoder, &frame, framing) })
                    .map(|joined| {
                        joined.unwrap_or_else(|error| {
                            Err(Error::decode(
                                "watch event",
                                format!("the decoding task failed: {error}"),
                                &[],
                            ))
                        })
                    })
            });
            async move {
                match decoded {
                    Ok(decoding) => decoding.await,
                    Err(error) => Err(error),
                }
            }
        })
        .buffered(workers)
        .boxed()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;

    use super::*;
    use crate::{Decoder, JsonDecoder, WatchEvent};

    fn event(name: &str) -> String {
        format!(
            "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\
             \"metadata\":{{\"name\":\"{name}\",\"resourceVersion\":\"1\"}}}}}}\n"
        )
    }

    /// The watch stream over `chunks`, with lines of at most `max_line` bytes, decoded by
    /// `workers` tasks.
    async fn names(chunks: Vec<&[u8]>, max_line: usize, workers: usize) -> Vec<Result<String>> {
        let chunks: Vec<Result<Bytes>> = chunks
            .into_iter()
            .map(|chunk| Ok(Bytes::copy_from_slice(chunk)))
            .collect();
        let decoder = Arc::new(JsonDecoder::<ConfigMap>::new(None));
        watch_events(
            futures::stream::iter(chunks).boxed(),
            decoder,
            <JsonDecoder<ConfigMap> as Decoder<ConfigMap>>::decode_event,
            Framing::Lines,
            max_line,
            workers,
        )
        .map(|event| match event? {
            WatchEvent::Added(object) => {
                Ok(object.object().metadata.name.clone().unwrap_or_default())
            }
            other => Ok(format!("{other:?}")),
        })
        .collect()
        .await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lines_split_anywhere_over_chunks_decode_in_order() {
        let body = format!("{}{}\n  \r\n{}", event("a"), event("b"), event("c"));
        let bytes = body.as_bytes();
        for workers in [0, 1, 3] {
            for size in [1, 7, 64, bytes.len()] {
                let chunks: Vec<&[u8]> = bytes.chunks(size).collect();
                let decoded: Vec<String> = names(chunks, MAX_WATCH_LINE, workers)
                    .await
                    .into_iter()
                    .collect::<Result<_>>()
                    .expect("every event decodes");
                assert_eq!(
                    decoded,
                    ["a", "b", "c"],
                    "chunks of {size} bytes, {workers} workers"
                );
            }
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_frames_decoded_on_workers_arrive_in_the_order_sent() {
        let names_sent: Vec<String> = (0..500).map(|i| format!("cm-{i}")).collect();
        let body: String = names_sent.iter().map(|name| event(name)).collect();
        for workers in [1, 2, 4, 16] {
            let chunks: Vec<&[u8]> = body.as_bytes().chunks(1000).collect();
            let decoded: Vec<String> = names(chunks, MAX_WATCH_LINE, workers)
                .await
                .into_iter()
                .collect::<Result<_>>()
                .expect("every event decodes");
            assert_eq!(decoded, names_sent, "{workers} workers");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_line_past_the_limit_ends_the_stream_with_a_decode_error() {
        let first = event("a");
        let endless = [b'{'; 300];
        for workers in [0, 2] {
            let chunks: Vec<&[u8]> = vec![first.as_bytes(), &endless[..100], &endless[100..]];
            let decoded = names(chunks, 256, workers).await;
            assert_eq!(decoded.len(), 2, "{decoded:?}");
            assert_eq!(decoded[0].as_deref().ok(), Some("a"));
            let error = decoded[1].as_ref().expect_err("the long line is refused");
            assert!(
                error.to_string().contains("longer than 256 bytes"),
                "{error}"
            );
        }
    }

    #[test]
    fn outside_a_runtime_frames_decode_where_they_are_read() {
        let body = format!("{}{}", event("a"), event("b"));
        let decoded = futures::executor::block_on(names(vec![body.as_bytes()], MAX_WATCH_LINE, 4));
        let decoded: Vec<String> = decoded
            .into_iter()
            .collect::<Result<_>>()
            .expect("every event decodes");
        assert_eq!(decoded, ["a", "b"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_bad_frame_between_good_ones_keeps_its_place() {
        let body = format!("{}not json\n{}", event("a"), event("c"));
        for workers in [0, 1, 4] {
            let decoded = names(vec![body.as_bytes()], MAX_WATCH_LINE, workers).await;
            assert_eq!(decoded.len(), 3, "{decoded:?}");
            assert_eq!(decoded[0].as_deref().ok(), Some("a"));
            assert!(decoded[1].is_err(), "{decoded:?}");
            assert_eq!(decoded[2].as_deref().ok(), Some("c"));
        }
    }
}
