//! A protobuf list body cut into its items as the bytes arrive, so that a list is decoded item
//! by item while the rest of it is still on the wire, and never held whole.

use bytes::{Buf, Bytes, BytesMut};

use crate::{
    Error, MAGIC,
    schema::Message,
    wire::{Reader, WireValue, Writer},
};

/// The envelope's field that holds the list message (`runtime.Unknown.raw`).
const RAW_FIELD: u32 = 2;
/// The tag of [`RAW_FIELD`], length-delimited.
const RAW_TAG: u64 = ((RAW_FIELD as u64) << 3) | 2;

/// Where the splitter is in the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// Before the four bytes of [`MAGIC`].
    Magic,
    /// Among the envelope's fields.
    Envelope,
    /// Inside the list message, with this many of its bytes still to come.
    List { remaining: usize },
}

/// Cuts an enveloped `...List` body, fed in chunks of any size, into its items and its *head*:
/// the same body with no items, which [`Envelope::parse`](crate::Envelope::parse) and
/// [`list_items`](crate::list_items) read as a list of nothing, with its type and metadata.
///
/// A chunk's bytes are copied once, into the splitter's buffer; each item is a [`Bytes`] view of
/// that buffer. Only the structure is read (tags, lengths, the envelope's magic): the items'
/// own bytes are for the decoder.
///
/// ```
/// use kinformer_protobuf::{Envelope, ListSplitter, encode_list, list_items, message_for};
///
/// let pod_list = message_for("v1", "PodList").expect("a built-in kind");
/// let pods = [&b"\x0a\x03\x0a\x01a"[..], &b"\x0a\x03\x0a\x01b"[..]];
/// let body = encode_list("v1", "PodList", b"", pods);
/// let mut splitter = ListSplitter::for_list(pod_list)?;
/// let mut items = Vec::new();
/// for chunk in body.chunks(3) {
///     splitter.feed(chunk)?;
///     items.extend(splitter.take_items());
/// }
/// assert_eq!(items, pods);
/// let head = splitter.finish()?;
/// let head = Envelope::parse(&head)?;
/// assert_eq!(head.kind, "PodList");
/// assert!(list_items(head.raw, pod_list)?.bytes.is_empty());
/// # Ok::<(), kinformer_protobuf::Error>(())
/// ```
#[derive(Debug)]
pub struct ListSplitter {
    items_field: u32,
    place: Place,
    /// Bytes received and not yet cut.
    pending: BytesMut,
    /// The envelope's fields other than the list, as they came.
    envelope: Vec<u8>,
    /// The list's fields other than its items, as they came.
    list: Vec<u8>,
    /// Whether the envelope's list field has begun.
    list_begun: bool,
    /// Whether the first item has been cut.
    items_begun: bool,
    /// Items cut and not yet taken.
    ready: Vec<Bytes>,
}

impl ListSplitter {
    /// A splitter for a list whose items are field `items_field` of the list message (2 in every
    /// Kubernetes `...List`).
    pub fn new(items_field: u32) -> Self {
        Self {
            items_field,
            place: Place::Magic,
            pending: BytesMut::new(),
            envelope: Vec::new(),
            list: Vec::new(),
            list_begun: false,
            items_begun: false,
            ready: Vec::new(),
        }
    }

    /// A splitter for lists of the message `list` describes.
    ///
    /// # Errors
    ///
    /// [`Error::Custom`] when `list` has no field `items`.
    pub fn for_list(list: &'static Message) -> Result<Self, Error> {
        let items = list
            .field_named("items")
            .ok_or_else(|| Error::custom(format_args!("{} has no items", list.name)))?;
        Ok(Self::new(items.number))
    }

    /// Reads the next bytes of the body.
    ///
    /// # Errors
    ///
    /// [`Error::NoMagic`] when the body is not a Kubernetes protobuf body, a wire error when
    /// its structure is broken. A body that merely stops early is [`finish`](Self::finish)'s
    /// to report.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), Error> {
        self.pending.extend_from_slice(chunk);
        while self.step()? {}
        Ok(())
    }

    /// Cuts one unit (the magic, a field, the start of the list) off the pending bytes;
    /// `false` when they hold no whole unit.
    fn step(&mut self) -> Result<bool, Error> {
        match self.place {
            Place::Magic => {
                let Some(magic) = self.pending.first_chunk::<4>() else {
                    // A body shorter than the magic that differs from it already is not one.
                    return match MAGIC.starts_with(&self.pending) {
                        true => Ok(false),
                        false => Err(Error::NoMagic),
                    };
                };
                if magic != MAGIC {
                    return Err(Error::NoMagic);
                }
                self.pending.advance(MAGIC.len());
                self.place = Place::Envelope;
                Ok(true)
            }
            Place::Envelope => {
                let mut reader = Reader::new(&self.pending);
                if reader.is_empty() {
                    return Ok(false);
                }
                // The list field is entered as soon as its tag and length are in, not when it is
                // whole: it is the body, less a few bytes.
                match reader.varint() {
                    Ok(RAW_TAG) => match reader.varint() {
                        Ok(len) => {
                            if self.list_begun {
                                return Err(Error::Malformed("a list body with two lists"));
                            }
                            let remaining = usize::try_from(len)
                                .map_err(|_| Error::Malformed("a length out of range"))?;
                            let header = self.pending.len() - reader.remaining().len();
                            self.pending.advance(header);
                            self.list_begun = true;
                            self.place = Place::List { remaining };
                            Ok(true)
                        }
                        Err(Error::Truncated(_)) => Ok(false),
                        Err(error) => Err(error),
                    },
                    Ok(_) => {
                        let Some(len) = whole_field(&self.pending)? else {
                            return Ok(false);
                        };
                        self.envelope.extend_from_slice(&self.pending[..len]);
                        self.pending.advance(len);
                        Ok(true)
                    }
                    Err(Error::Truncated(_)) => Ok(false),
                    Err(error) => Err(error),
                }
            }
            Place::List { remaining: 0 } => {
                self.place = Place::Envelope;
                Ok(true)
            }
            Place::List { remaining } => {
                let within = &self.pending[..self.pending.len().min(remaining)];
                let mut reader = Reader::new(within);
                let (number, value) = match reader.field() {
                    Ok(Some(field)) => field,
                    Ok(None) => return Ok(false),
                    Err(Error::Truncated(_)) if within.len() < remaining => return Ok(false),
                    Err(Error::Truncated(_)) => {
                        return Err(Error::Malformed("a field runs past the end of its list"));
                    }
                    Err(error) => return Err(error),
                };
                let len = within.len() - reader.remaining().len();
                self.place = Place::List {
                    remaining: remaining - len,
                };
                match value {
                    WireValue::Bytes(item) if number == self.items_field => {
                        let header = len - item.len();
                        self.pending.advance(header);
                        let item = self.pending.split_to(len - header).freeze();
                        self.ready.push(item);
                        self.items_begun = true;
                    }
                    _ => {
                        self.list.extend_from_slice(&self.pending[..len]);
                        self.pending.advance(len);
                    }
                }
                Ok(true)
            }
        }
    }

    /// Once the first item has been cut, the head read so far: the envelope's fields before
    /// the list and the list's fields before its items (a list as kube-apiserver writes it has
    /// its type and metadata there), so that the kind can be checked and the `continue` token
    /// read before any item is decoded.
    pub fn head_before_items(&self) -> Option<Vec<u8>> {
        self.items_begun.then(|| self.head())
    }

    /// The items cut since the last call, in order.
    pub fn take_items(&mut self) -> Vec<Bytes> {
        std::mem::take(&mut self.ready)
    }

    /// The head (the enveloped list with no items), once the body is complete.
    ///
    /// # Errors
    ///
    /// [`Error::Truncated`] when the body stopped inside a value.
    pub fn finish(self) -> Result<Vec<u8>, Error> {
        match self.place {
            Place::Envelope if self.pending.is_empty() => Ok(self.head()),
            Place::Magic => Err(Error::NoMagic),
            _ => Err(Error::Truncated("the list body")),
        }
    }

    fn head(&self) -> Vec<u8> {
        let mut writer = Writer::default();
        writer.buf.extend_from_slice(MAGIC);
        writer.buf.extend_from_slice(&self.envelope);
        writer.bytes_field(RAW_FIELD, &self.list);
        writer.buf
    }
}

/// The length of the whole field `bytes` starts with, `None` while it has not all arrived.
fn whole_field(bytes: &[u8]) -> Result<Option<usize>, Error> {
    let mut reader = Reader::new(bytes);
    match reader.field() {
        Ok(_) => Ok(Some(bytes.len() - reader.remaining().len())),
        Err(Error::Truncated(_)) => Ok(None),
        Err(error) => Err(error),
    }
}
