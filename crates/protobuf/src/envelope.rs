//! Kubernetes' framing around protobuf messages: the `k8s\0` + `runtime.Unknown` envelope of
//! every body, and the length-prefixed `WatchEvent` frames of a watch stream.

use bytes::{Buf, Bytes, BytesMut};
use serde::de::DeserializeOwned;

use crate::{
    DecodeOptions, Error, from_message,
    generated::KINDS,
    schema::{Message, Ty},
    wire::{Reader, Writer},
};

/// The four bytes every Kubernetes protobuf body starts with.
pub const MAGIC: &[u8; 4] = b"k8s\0";

/// The media type of Kubernetes protobuf.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// The media type of a protobuf watch stream.
pub const WATCH_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// The largest watch frame accepted; a longer length prefix means a corrupt stream, not an
/// object (etcd refuses values over 1.5 MiB by default).
pub const MAX_FRAME_LEN: usize = 64 * 1024 * 1024;

/// The table for `api_version`/`kind` (`v1`/`Pod`, `apps/v1`/`DeploymentList`), if Kubernetes
/// defines that kind in protobuf.
pub fn message_for(api_version: &str, kind: &str) -> Option<&'static Message> {
    KINDS
        .binary_search_by(|(version, name, _)| (*version, *name).cmp(&(api_version, kind)))
        .ok()
        .map(|index| KINDS[index].2)
}

/// One protobuf body, opened: what it says it holds and the message bytes.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    /// `apiVersion` of the object (`v1`, `apps/v1`).
    pub api_version: &'a str,
    /// `kind` of the object (`Pod`, `PodList`).
    pub kind: &'a str,
    /// The message itself.
    pub raw: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// Opens a body: checks the magic and reads the `runtime.Unknown` around the message.
    ///
    /// # Errors
    ///
    /// [`Error::NoMagic`] for a body that is not Kubernetes protobuf, [`Error::ContentEncoding`]
    /// for a compressed payload, a wire error for a broken envelope.
    pub fn parse(body: &'a [u8]) -> Result<Self, Error> {
        let unknown = body.strip_prefix(MAGIC).ok_or(Error::NoMagic)?;
        let mut envelope = Envelope {
            api_version: "",
            kind: "",
            raw: &[],
        };
        let mut reader = Reader::new(unknown);
        while let Some((number, value)) = reader.field()? {
            match number {
                1 => {
                    let mut type_meta = Reader::new(value.bytes("typeMeta")?);
                    while let Some((number, value)) = type_meta.field()? {
                        match number {
                            1 => envelope.api_version = utf8(value.bytes("apiVersion")?)?,
                            2 => envelope.kind = utf8(value.bytes("kind")?)?,
                            _ => {}
                        }
                    }
                }
                2 => envelope.raw = value.bytes("raw")?,
                3 => {
                    let encoding = utf8(value.bytes("contentEncoding")?)?;
                    if !encoding.is_empty() {
                        return Err(Error::ContentEncoding(encoding.to_owned()));
                    }
                }
                _ => {}
            }
        }
        Ok(envelope)
    }

    /// The table for this body's kind.
    ///
    /// # Errors
    ///
    /// [`Error::UnknownKind`] when no generated table describes it.
    pub fn message(&self) -> Result<&'static Message, Error> {
        message_for(self.api_version, self.kind).ok_or_else(|| Error::UnknownKind {
            api_version: self.api_version.to_owned(),
            kind: self.kind.to_owned(),
        })
    }

    /// Decodes the message into `T` with the table of this body's kind.
    ///
    /// # Errors
    ///
    /// As for [`message`](Envelope::message) and [`from_message`].
    pub fn decode<T: DeserializeOwned>(&self, options: DecodeOptions) -> Result<T, Error> {
        from_message(self.raw, self.message()?, options)
    }
}

fn utf8(bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::Utf8)
}

/// Wraps `raw`, a message of `api_version`/`kind`, in the `k8s\0` envelope.
pub fn encode_envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.buf.extend_from_slice(MAGIC);
    write_type_meta(&mut writer, api_version, kind);
    writer.bytes_field(2, raw);
    writer.bytes_field(3, b"");
    writer.bytes_field(4, b"");
    writer.buf
}

/// One event of a protobuf watch stream (a `metav1.WatchEvent`).
#[derive(Debug, Clone, Copy)]
pub struct WatchFrame<'a> {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    pub event_type: &'a str,
    /// The object, itself an enveloped body (see [`Envelope::parse`]).
    pub object: &'a [u8],
}

impl<'a> WatchFrame<'a> {
    /// Reads one frame (without its length prefix).
    ///
    /// # Errors
    ///
    /// A wire error when the frame is not a `WatchEvent`.
    pub fn parse(frame: &'a [u8]) -> Result<Self, Error> {
        let mut event = WatchFrame {
            event_type: "",
            object: &[],
        };
        let mut reader = Reader::new(frame);
        while let Some((number, value)) = reader.field()? {
            match number {
                1 => event.event_type = utf8(value.bytes("type")?)?,
                2 => {
                    let mut raw_extension = Reader::new(value.bytes("object")?);
                    while let Some((number, value)) = raw_extension.field()? {
                        if number == 1 {
                            event.object = value.bytes("object.raw")?;
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(event)
    }
}

/// A watch event as kube-apiserver frames it: a big-endian `u32` length, then a `WatchEvent`
/// whose object is the enveloped `object`.
pub fn encode_watch_frame(event_type: &str, object: &[u8]) -> Vec<u8> {
    let mut writer = Writer::default();
    writer.bytes_field(1, event_type.as_bytes());
    let _ = writer.message_field::<Error>(2, |raw_extension| {
        raw_extension.bytes_field(1, object);
        Ok(())
    });
    let mut frame = Vec::with_capacity(writer.buf.len() + 4);
    frame.extend_from_slice(&(writer.buf.len() as u32).to_be_bytes());
    frame.extend_from_slice(&writer.buf);
    frame
}

/// Cuts a watch stream, arriving in arbitrary chunks, into frames.
///
/// A chunk's bytes are copied once, into the reader's buffer; each frame is a [`Bytes`] view of
/// that buffer, not a copy of its own, and the buffer's memory is reused once the frames cut from
/// it are dropped.
#[derive(Debug, Default)]
pub struct FrameReader {
    buffer: BytesMut,
}

impl FrameReader {
    /// Appends a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
    }

    /// The next complete frame (without its length prefix), `None` until one has arrived in
    /// full.
    ///
    /// # Errors
    ///
    /// [`Error::Malformed`] for a length prefix over [`MAX_FRAME_LEN`]: the stream is corrupt
    /// and cannot be resynchronised.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, Error> {
        let Some(prefix) = self.buffer.first_chunk::<4>() else {
            return Ok(None);
        };
        let len = u32::from_be_bytes(*prefix) as usize;
        if len > MAX_FRAME_LEN {
            return Err(Error::Malformed("a watch frame longer than 64 MiB"));
        }
        if self.buffer.len() < 4 + len {
            return Ok(None);
        }
        self.buffer.advance(4);
        Ok(Some(self.buffer.split_to(len).freeze()))
    }

    /// Bytes received that do not yet make a whole frame.
    pub fn pending(&self) -> usize {
        self.buffer.len()
    }
}

/// The items of a list message, undecoded, so that each can be decoded (and shared or dropped)
/// on its own.
#[derive(Debug)]
pub struct ListItems<'a> {
    /// The table of one item.
    pub message: &'static Message,
    /// Each item's message bytes, in list order.
    pub bytes: Vec<&'a [u8]>,
}

/// Splits `raw`, a `...List` message described by `list`, into its items.
///
/// # Errors
///
/// [`Error::Custom`] when `list` has no repeated message field `items`, a wire error when the
/// bytes are broken.
pub fn list_items<'a>(raw: &'a [u8], list: &'static Message) -> Result<ListItems<'a>, Error> {
    let items = list
        .field_named("items")
        .ok_or_else(|| Error::custom(format_args!("{} has no items", list.name)))?;
    let Ty::Message(message) = items.ty else {
        return Err(Error::custom(format_args!(
            "{}.items is not a message",
            list.name
        )));
    };
    let mut bytes = Vec::new();
    let mut reader = Reader::new(raw);
    while let Some((number, value)) = reader.field()? {
        if number == items.number {
            bytes.push(value.bytes("list item")?);
        }
    }
    Ok(ListItems { message, bytes })
}

/// Writes an enveloped `...List` body from its parts, so that a server can send items it
/// encoded once and cached: `list_meta` is the encoded `ListMeta` (field 1), each of `items` an
/// encoded item message (field 2).
///
/// The same bytes as [`encode_list_head`], then [`list_item_prefix`] and the item for
/// each item, then [`LIST_TAIL`]; a server that sends a list as it writes it uses those.
pub fn encode_list<'a>(
    api_version: &str,
    kind: &str,
    list_meta: &[u8],
    items: impl IntoIterator<Item = &'a [u8]> + Clone,
) -> Vec<u8> {
    // The list is written once, straight into the envelope: a 100k-Pod list is large enough
    // that building it apart and copying it in shows up.
    let lens = items.clone().into_iter().map(<[u8]>::len);
    let raw_len = list_raw_len(list_meta, lens);
    let capacity = raw_len + 64 + api_version.len() + kind.len();
    let mut buf = list_head(api_version, kind, list_meta, raw_len, capacity);
    for item in items {
        buf.extend_from_slice(&list_item_prefix(item.len()));
        buf.extend_from_slice(item);
    }
    buf.extend_from_slice(LIST_TAIL);
    buf
}

/// The bytes that open an enveloped `...List` body whose items are `item_lens` bytes long, in
/// order: the envelope's magic and type, and the list message up to its first item. For a
/// server that sends each item as it writes it, as kube-apiserver streams a list; the body
/// goes on with [`list_item_prefix`] and each item, and ends with [`LIST_TAIL`].
pub fn encode_list_head(
    api_version: &str,
    kind: &str,
    list_meta: &[u8],
    item_lens: impl IntoIterator<Item = usize>,
) -> Vec<u8> {
    let raw_len = list_raw_len(list_meta, item_lens);
    let capacity = 64 + api_version.len() + kind.len() + list_meta.len();
    list_head(api_version, kind, list_meta, raw_len, capacity)
}

/// What goes before an item of `len` bytes in a list body (its field tag and length), as
/// [`encode_list_head`] counted it.
pub fn list_item_prefix(len: usize) -> ListItemPrefix {
    let mut bytes = [0; 11];
    bytes[0] = (2 << 3) | 2;
    let mut at = 1;
    let mut value = len as u64;
    while value >= 0x80 {
        bytes[at] = (value as u8) | 0x80;
        value >>= 7;
        at += 1;
    }
    bytes[at] = value as u8;
    ListItemPrefix {
        bytes,
        len: at as u8 + 1,
    }
}

/// The tag and length before one item of a list body: [`list_item_prefix`]. Derefs to its
/// bytes.
#[derive(Debug, Clone, Copy)]
pub struct ListItemPrefix {
    bytes: [u8; 11],
    len: u8,
}

impl std::ops::Deref for ListItemPrefix {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }
}

/// The bytes that end an enveloped list body after its last item: the envelope's empty
/// `contentEncoding` and `contentType`.
pub const LIST_TAIL: &[u8] = &[(3 << 3) | 2, 0, (4 << 3) | 2, 0];

/// The length of a list message: its `ListMeta` and its items, each as a field.
fn list_raw_len(list_meta: &[u8], item_lens: impl IntoIterator<Item = usize>) -> usize {
    let entry_len = |len: usize| 1 + varint_len(len as u64) + len;
    entry_len(list_meta.len()) + item_lens.into_iter().map(entry_len).sum::<usize>()
}

/// A buffer of `capacity` holding a list body up to its first item.
fn list_head(
    api_version: &str,
    kind: &str,
    list_meta: &[u8],
    raw_len: usize,
    capacity: usize,
) -> Vec<u8> {
    let mut writer = Writer {
        buf: Vec::with_capacity(capacity),
    };
    writer.buf.extend_from_slice(MAGIC);
    write_type_meta(&mut writer, api_version, kind);
    writer.tag(2, 2);
    writer.varint(raw_len as u64);
    writer.bytes_field(1, list_meta);
    writer.buf
}

fn varint_len(value: u64) -> usize {
    (64 - (value | 1).leading_zeros() as usize).div_ceil(7)
}

fn write_type_meta(writer: &mut Writer, api_version: &str, kind: &str) {
    let _ = writer.message_field::<Error>(1, |type_meta| {
        type_meta.bytes_field(1, api_version.as_bytes());
        type_meta.bytes_field(2, kind.as_bytes());
        Ok(())
    });
}
