//! Body decoders: Content-Length countdown and a validating chunked state machine.
//!
//! This file owns "where does the body end" once the head has chosen a [`BodyKind`]. The proxy
//! forwards chunked bodies unchanged (pass-through, no re-encoding), so the decoder's job is to
//! validate every framing byte strictly, report where the payload lies, and say when the message
//! is over. Strictness matters because a server behind us parses the same bytes: any leniency we
//! have and it lacks (bare LF, whitespace, odd extensions) is a smuggling vector.

use std::ops::Range;

use super::{is_tchar, is_value_byte, BodyKind, ErrorKind, H1Error, Limits, Side};

/// What one call to `feed` did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of the input consumed (framing and payload); forward exactly these.
    pub consumed: usize,
    /// Payload bytes inside the input (`input[data]`); empty when this call saw none.
    pub data: Range<usize>,
    /// The body is complete: bytes after `consumed` belong to the next message.
    pub done: bool,
}

/// Content-Length body: counts down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LengthDecoder {
    remaining: u64,
}

impl LengthDecoder {
    pub fn new(length: u64) -> Self {
        LengthDecoder { remaining: length }
    }

    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Consumes up to the remaining length from `input`. Never fails.
    pub fn feed(&mut self, input: &[u8]) -> Progress {
        let take = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(input.len());
        self.remaining -= take as u64;
        Progress {
            consumed: take,
            data: 0..take,
            done: self.remaining == 0,
        }
    }
}

/// States of the chunked decoder (RFC 9112 §7.1).
///
/// ```text
///            hex digit                ';'                 CR                LF (size>0)
///   ┌──────► Size ───────────────────► Ext ─────────────► SizeLf ─────────────────► Data(n)
///   │         │ ▲ hex                   │ ext bytes ▲        ▲                         │ n bytes
///   │         │ └─┘                     └───────────┘        │ CR                      ▼
///   │         └──────────────────────────────────────────────┘                      DataCr
///   │                                                                                  │ CR
///   │  LF                                                                              ▼
///   └───────────────────────────────────────────────────────────────────────────── DataLf
///
///   SizeLf ──LF (size 0)──► TrailerStart ──CR──► EndLf ──LF──► Done
///                               │ tchar            ▲
///                               ▼                  │
///                          TrailerName ──':'──► TrailerValue ──CR──► TrailerLf ──LF──► TrailerStart
/// ```
///
/// Every arrow not drawn is an error: no whitespace before or after the size, no bare LF, no
/// obs-fold in trailers, no control bytes in extensions or trailer values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkedState {
    /// Reading the hex chunk size; `digits` counts the digits seen so far.
    Size { size: u64, digits: u32 },
    /// Inside a chunk extension; `len` bytes seen so far.
    Ext { size: u64, len: usize },
    /// CR of the size line seen, LF expected.
    SizeLf { size: u64 },
    /// Payload bytes still expected in this chunk.
    Data { remaining: u64 },
    /// Payload over, CR expected.
    DataCr,
    /// CR after the payload seen, LF expected.
    DataLf,
    /// At the start of a trailer line (or of the final empty line).
    TrailerStart,
    /// Inside a trailer field name.
    TrailerName,
    /// Inside a trailer field value.
    TrailerValue,
    /// CR of a trailer line seen, LF expected.
    TrailerLf,
    /// CR of the final empty line seen, LF expected.
    EndLf,
    /// The body is complete.
    Done,
}

/// Validating chunked-body decoder; see [`ChunkedState`] for the diagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: ChunkedState,
    side: Side,
    max_ext: usize,
    max_trailers: usize,
    trailer_bytes: usize,
}

/// Largest chunk size accepted: 2^63 - 1.
const MAX_CHUNK: u64 = i64::MAX as u64;

/// Most hex digits accepted in a chunk size, leading zeros included.
const MAX_SIZE_DIGITS: u32 = 32;

impl ChunkedDecoder {
    /// `side` decides the status of errors (400 for request bodies, 502 for response bodies).
    pub fn new(limits: &Limits, side: Side) -> Self {
        ChunkedDecoder {
            state: ChunkedState::Size { size: 0, digits: 0 },
            side,
            max_ext: limits.max_chunk_ext,
            max_trailers: limits.max_trailers,
            trailer_bytes: 0,
        }
    }

    /// The current state, for incident dumps and tests.
    pub fn state(&self) -> ChunkedState {
        self.state
    }

    pub fn is_done(&self) -> bool {
        self.state == ChunkedState::Done
    }

    /// Consumes framing bytes and at most one run of payload from `input`.
    ///
    /// Contract: returns after the first payload run (so `data` is a single range), at `Done`, or
    /// when the input is exhausted; call again with `input[consumed..]` while `consumed > 0`
    /// and not done. After an error the decoder must not be used again.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, H1Error> {
        use ChunkedState::*;
        let mut i = 0usize;
        while let Some(&b) = input.get(i) {
            let next = match self.state {
                Size { size, digits } => match hex_value(b) {
                    Some(v) => {
                        // Bounds both the value and the number of (leading-zero) digits.
                        if size > (MAX_CHUNK >> 4) || digits >= MAX_SIZE_DIGITS {
                            return Err(self.err(ErrorKind::BadChunkSize));
                        }
                        Size {
                            size: (size << 4) | u64::from(v),
                            digits: digits + 1,
                        }
                    }
                    None if digits == 0 => return Err(self.err(ErrorKind::BadChunkSize)),
                    None if b == b';' => Ext { size, len: 0 },
                    None if b == b'\r' => SizeLf { size },
                    None => return Err(self.err(ErrorKind::BadChunkSize)),
                },
                Ext { size, len } => {
                    if b == b'\r' {
                        SizeLf { size }
                    } else if len >= self.max_ext || !(is_value_byte(b) || b == b';') {
                        return Err(self.err(ErrorKind::BadChunkExtension));
                    } else {
                        Ext { size, len: len + 1 }
                    }
                }
                SizeLf { size } => match (b, size) {
                    (b'\n', 0) => TrailerStart,
                    (b'\n', n) => Data { remaining: n },
                    _ => return Err(self.err(ErrorKind::BadChunkTerminator)),
                },
                Data { remaining } => {
                    let avail = input.len() - i;
                    let take = usize::try_from(remaining).unwrap_or(usize::MAX).min(avail);
                    let left = remaining - take as u64;
                    self.state = if left == 0 {
                        DataCr
                    } else {
                        Data { remaining: left }
                    };
                    return Ok(Progress {
                        consumed: i + take,
                        data: i..i + take,
                        done: false,
                    });
                }
                DataCr if b == b'\r' => DataLf,
                DataLf if b == b'\n' => Size { size: 0, digits: 0 },
                DataCr | DataLf => return Err(self.err(ErrorKind::BadChunkTerminator)),
                TrailerStart => {
                    if b == b'\r' {
                        EndLf
                    } else if is_tchar(b) {
                        self.count_trailer()?;
                        TrailerName
                    } else {
                        return Err(self.err(ErrorKind::BadTrailer));
                    }
                }
                TrailerName => {
                    self.count_trailer()?;
                    if b == b':' {
                        TrailerValue
                    } else if is_tchar(b) {
                        TrailerName
                    } else {
                        return Err(self.err(ErrorKind::BadTrailer));
                    }
                }
                TrailerValue => {
                    self.count_trailer()?;
                    if b == b'\r' {
                        TrailerLf
                    } else if is_value_byte(b) {
                        TrailerValue
                    } else {
                        return Err(self.err(ErrorKind::BadTrailer));
                    }
                }
                TrailerLf => {
                    self.count_trailer()?;
                    if b == b'\n' {
                        TrailerStart
                    } else {
                        return Err(self.err(ErrorKind::BadTrailer));
                    }
                }
                EndLf if b == b'\n' => Done,
                EndLf => return Err(self.err(ErrorKind::BadTrailer)),
                Done => break,
            };
            self.state = next;
            i += 1;
            if self.state == Done {
                break;
            }
        }
        Ok(Progress {
            consumed: i,
            data: i..i,
            done: self.state == Done,
        })
    }

    fn count_trailer(&mut self) -> Result<(), H1Error> {
        self.trailer_bytes = self.trailer_bytes.saturating_add(1);
        if self.trailer_bytes > self.max_trailers {
            return Err(self.err(ErrorKind::TrailersTooLarge));
        }
        Ok(())
    }

    fn err(&self, kind: ErrorKind) -> H1Error {
        H1Error::new(kind, self.side)
    }
}

fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// One decoder for any [`BodyKind`], so the engine holds a single field per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyDecoder {
    /// No body: done immediately.
    None,
    Length(LengthDecoder),
    Chunked(ChunkedDecoder),
    /// Everything is payload until the peer closes; `done` is never reported.
    CloseDelimited,
}

impl BodyDecoder {
    pub fn new(kind: BodyKind, limits: &Limits, side: Side) -> Self {
        match kind {
            BodyKind::None => BodyDecoder::None,
            BodyKind::Length(n) => BodyDecoder::Length(LengthDecoder::new(n)),
            BodyKind::Chunked => BodyDecoder::Chunked(ChunkedDecoder::new(limits, side)),
            BodyKind::CloseDelimited => BodyDecoder::CloseDelimited,
        }
    }

    /// See [`ChunkedDecoder::feed`]; the same contract holds for every kind.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, H1Error> {
        match self {
            BodyDecoder::None => Ok(Progress {
                consumed: 0,
                data: 0..0,
                done: true,
            }),
            BodyDecoder::Length(d) => Ok(d.feed(input)),
            BodyDecoder::Chunked(d) => d.feed(input),
            BodyDecoder::CloseDelimited => Ok(Progress {
                consumed: input.len(),
                data: 0..input.len(),
                done: false,
            }),
        }
    }
}
