//! `resource.Quantity` read as apimachinery reads it: `ParseQuantity`'s checks, and the text
//! Go's `Quantity.String` then writes, which is what Go's JSON holds.
//!
//! Go keeps the text as it came when it is already in one of the forms `ParseQuantity`
//! recognises as canonical (`"100m"`, `"1Ki"`, and a few oddities such as `"+1"` or `"01Ki"`);
//! any other text is rewritten from the value: `"0.1"` becomes `"100m"`, `"1.5Gi"` becomes
//! `"1536Mi"`. Values Go rounds or caps are rounded and capped alike: up to a multiple of 1n,
//! and a binary-suffixed value at the largest `int64`.
//!
//! The arithmetic runs on decimal digits, never on a power of ten, so no input makes it slow:
//! where Go's `inf.Dec` would multiply by 10^(2^31), this moves an exponent. Exponents are
//! `int32` in Go and wrap; this reads them as `i64`, so the two agree on every exponent whose
//! value stays within `int32` (a quantity such as `1e2147483647` is outside that).

use std::borrow::Cow;

use crate::{
    Error,
    wire::{Reader, WireValue},
};

/// `ParseQuantity`'s error for text outside its grammar.
const FORMAT: &str = "quantities must match the regular expression \
                      '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
/// `ParseQuantity`'s error for a number it cannot read.
const NUMERIC: &str = "unable to parse numeric part of quantity";
/// `ParseQuantity`'s error for an unknown suffix.
const SUFFIX: &str = "unable to parse quantity's suffix";

/// The largest `int64`, where Go caps a binary-suffixed quantity.
const MAX_INT64: &[u8] = b"9223372036854775807";

/// The text Go holds for the `Quantity` message `bytes` (`{string = 1}`): every occurrence of
/// the field is parsed, as Go's `Unmarshal` parses each, and the last wins; a message without
/// it is zero, `"0"`.
pub(crate) fn from_message(bytes: &[u8]) -> Result<Cow<'_, str>, Error> {
    from_segments(&[bytes])
}

/// [`from_message`] of a `Quantity` that came more than once: Go's `Unmarshal` reads each
/// occurrence into the same value, so the last text wins, and an occurrence without one keeps
/// the text before it.
pub(crate) fn from_segments<'de>(segments: &[&'de [u8]]) -> Result<Cow<'de, str>, Error> {
    let mut text = Cow::Borrowed("0");
    for segment in segments {
        let mut reader = Reader::new(segment);
        while let Some((number, value)) = reader.field()? {
            if number == 1 {
                text = canonical(value.bytes("quantity")?)?;
            }
        }
    }
    Ok(text)
}

/// [`from_message`] for a field's value.
pub(crate) fn from_value(value: WireValue<'_>) -> Result<Cow<'_, str>, Error> {
    from_message(value.bytes("quantity")?)
}

/// How a suffix scales the number before it, and how Go writes the value back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    /// `12e6`.
    DecimalExponent,
    /// `12Mi`: 12 × 2^20.
    BinarySI,
    /// `12M`: 12 × 10^6.
    DecimalSI,
}

/// The pieces `parseQuantityString` cuts a quantity into.
struct Parts<'a> {
    positive: bool,
    /// The sign and the number, without the suffix.
    value: &'a [u8],
    /// The digits before the point without leading zeros; `"0"` when there are none.
    num: &'a [u8],
    /// The digits after the point.
    denom: &'a [u8],
    suffix: &'a [u8],
}

/// apimachinery's `parseQuantityString`, step for step.
fn parts(text: &[u8]) -> Result<Parts<'_>, Error> {
    let end = text.len();
    let mut pos = 0;
    let mut positive = true;
    match text.first() {
        Some(b'-') => {
            positive = false;
            pos += 1;
        }
        Some(b'+') => pos += 1,
        _ => {}
    }
    let whole = |num, value, denom| Parts {
        positive,
        value,
        num,
        denom,
        suffix: b"",
    };
    // Leading zeros.
    loop {
        match text.get(pos) {
            None => return Ok(whole(b"0", b"0", b"")),
            Some(b'0') => pos += 1,
            Some(_) => break,
        }
    }
    let start = pos;
    while text.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    if pos == end {
        return Ok(whole(&text[start..], text, b""));
    }
    let num = if pos == start {
        &b"0"[..]
    } else {
        &text[start..pos]
    };
    let mut denom = &b""[..];
    if text[pos] == b'.' {
        pos += 1;
        let start = pos;
        while text.get(pos).is_some_and(u8::is_ascii_digit) {
            pos += 1;
        }
        denom = &text[start..pos];
        if pos == end {
            return Ok(whole(num, text, denom));
        }
    }
    let value = &text[..pos];
    let suffix = &text[pos..];
    while text
        .get(pos)
        .is_some_and(|byte| b"eEinumkKMGTP".contains(byte))
    {
        pos += 1;
    }
    if matches!(text.get(pos), Some(b'-' | b'+')) {
        pos += 1;
    }
    while text.get(pos).is_some_and(u8::is_ascii_digit) {
        pos += 1;
    }
    if pos < end {
        return Err(Error::Malformed(FORMAT));
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix,
    })
}

/// The base, exponent and format a suffix stands for (`quantitySuffixer.interpret`).
fn interpret(suffix: &[u8]) -> Option<(u32, i32, Format)> {
    use Format::{BinarySI, DecimalExponent, DecimalSI};
    Some(match suffix {
        b"" => (10, 0, DecimalSI),
        b"n" => (10, -9, DecimalSI),
        b"u" => (10, -6, DecimalSI),
        b"m" => (10, -3, DecimalSI),
        b"k" => (10, 3, DecimalSI),
        b"M" => (10, 6, DecimalSI),
        b"G" => (10, 9, DecimalSI),
        b"T" => (10, 12, DecimalSI),
        b"P" => (10, 15, DecimalSI),
        b"E" => (10, 18, DecimalSI),
        b"Ki" => (2, 10, BinarySI),
        b"Mi" => (2, 20, BinarySI),
        b"Gi" => (2, 30, BinarySI),
        b"Ti" => (2, 40, BinarySI),
        b"Pi" => (2, 50, BinarySI),
        b"Ei" => (2, 60, BinarySI),
        [b'e' | b'E', exponent @ ..] if !exponent.is_empty() => {
            // `strconv.ParseInt(…, 10, 64)`, then Go's conversion to `int32`, which wraps.
            let exponent: i64 = std::str::from_utf8(exponent).ok()?.parse().ok()?;
            (10, exponent as i32, DecimalExponent)
        }
        _ => return None,
    })
}

/// The text Go's `Quantity.String` writes for the quantity `text`, or `ParseQuantity`'s error.
/// Borrowed when Go keeps the text as it came.
pub(crate) fn canonical(text: &[u8]) -> Result<Cow<'_, str>, Error> {
    if text.is_empty() {
        return Err(Error::Malformed(FORMAT));
    }
    let parts = parts(text)?;
    let (base, exponent, format) = interpret(parts.suffix).ok_or(Error::Malformed(SUFFIX))?;
    let fast = match kept_as_written(&parts, base, exponent, format) {
        // Every byte is in the grammar, so ASCII.
        Fast::Kept => return Ok(Cow::Borrowed(std::str::from_utf8(text).unwrap_or("0"))),
        Fast::Value => true,
        Fast::None => false,
    };
    // Go's `inf.Dec` reads the number only off its fast path, and needs a digit.
    if !fast && !parts.value.iter().any(u8::is_ascii_digit) {
        return Err(Error::Malformed(NUMERIC));
    }
    Ok(Cow::Owned(
        Number::of(&parts, base, exponent, format).write(),
    ))
}

/// What `ParseQuantity`'s `int64` fast path makes of a quantity.
enum Fast {
    /// The value fits, and the text is in canonical form: Go keeps it.
    Kept,
    /// The value fits, and Go writes it anew.
    Value,
    /// Off the fast path: Go reads the number with `inf.Dec`.
    None,
}

/// `ParseQuantity`'s fast path: whether the value fits an `int64` at a scale of at least 1n,
/// and whether Go then keeps the text.
fn kept_as_written(parts: &Parts<'_>, base: u32, exponent: i32, format: Format) -> Fast {
    let digits = (parts.num.len() + parts.denom.len()) as i32;
    let precision = match format {
        Format::DecimalExponent | Format::DecimalSI => 18 - digits,
        Format::BinarySI if exponent >= 0 && parts.denom.is_empty() => {
            15 - parts.num.len() as i32 - exponent * 3 / 10 - 1
        }
        Format::BinarySI => -1,
    };
    if precision < 0 {
        return Fast::None;
    }
    let scale = (if base == 2 { 0 } else { exponent }).wrapping_sub(parts.denom.len() as i32);
    if scale < -9 {
        return Fast::None;
    }
    let shifted = parts.num.iter().chain(parts.denom);
    let value = shifted
        .clone()
        .fold(0i64, |value, digit| value * 10 + i64::from(digit - b'0'));
    let mantissa = if base == 2 { 1i64 << exponent } else { 1 };
    if value.checked_mul(mantissa).is_none() {
        return Fast::None;
    }
    let kept = if format == Format::BinarySI {
        exponent % 10 == 0 && value & 0x07 != 0
    } else {
        let shifted: Vec<u8> = shifted.copied().collect();
        scale % 3 == 0 && !shifted.ends_with(b"000") && shifted[0] != b'0'
    };
    if kept { Fast::Kept } else { Fast::Value }
}

/// A quantity's exact value: `digits` × 10^`exponent`, `digits` without leading zeros (empty
/// for zero), and the format Go writes it in.
struct Number {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
    format: Format,
}

impl Number {
    /// The value `ParseQuantity` holds: the number times its suffix, rounded up to a multiple
    /// of 1n and, binary, capped at the largest `int64`.
    fn of(parts: &Parts<'_>, base: u32, exponent: i32, mut format: Format) -> Number {
        let mut digits: Vec<u8> = parts
            .value
            .iter()
            .copied()
            .filter(u8::is_ascii_digit)
            .skip_while(|&digit| digit == b'0')
            .collect();
        let fraction = parts
            .value
            .iter()
            .position(|&byte| byte == b'.')
            .map_or(0, |point| parts.value.len() - point - 1);
        let mut power = -(fraction as i64);
        if base == 10 {
            power += i64::from(exponent);
        } else {
            for _ in 0..exponent / 10 {
                multiply(&mut digits, 1024);
            }
        }
        if power < -9 && !digits.is_empty() {
            let dropped = usize::try_from(-9 - power).unwrap_or(usize::MAX);
            if dropped >= digits.len() {
                digits = vec![b'1'];
            } else {
                let kept = digits.len() - dropped;
                let rest_nonzero = digits[kept..].iter().any(|&digit| digit != b'0');
                digits.truncate(kept);
                if rest_nonzero {
                    increment(&mut digits);
                }
            }
            power = -9;
        }
        let mut number = Number {
            negative: !parts.positive,
            digits,
            exponent: power,
            format,
        };
        if format == Format::BinarySI {
            if number.magnitude_above(MAX_INT64) {
                number.digits = MAX_INT64.to_vec();
                number.exponent = 0;
            }
            if !number.digits.is_empty() && number.integer_digits() <= 0 {
                format = Format::DecimalSI;
            }
        }
        number.format = format;
        number
    }

    /// How many digits the integer part has (zero or less for a value under 1).
    fn integer_digits(&self) -> i64 {
        self.digits.len() as i64 + self.exponent
    }

    /// Whether |value| exceeds the integer written `limit` (no leading zeros).
    fn magnitude_above(&self, limit: &[u8]) -> bool {
        let length = self.integer_digits();
        let limit_length = limit.len() as i64;
        if self.digits.is_empty() || length != limit_length {
            return !self.digits.is_empty() && length > limit_length;
        }
        let whole = usize::try_from(length).unwrap_or(0);
        let integer = self
            .digits
            .iter()
            .copied()
            .chain(std::iter::repeat(b'0'))
            .take(whole);
        match integer.cmp(limit.iter().copied()) {
            std::cmp::Ordering::Equal => self.digits.iter().skip(whole).any(|&d| d != b'0'),
            order => order.is_gt(),
        }
    }

    /// `Quantity.CanonicalizeBytes`: the text Go writes for the value.
    fn write(mut self) -> String {
        while self.digits.last() == Some(&b'0') {
            self.digits.pop();
            self.exponent += 1;
        }
        if self.digits.is_empty() {
            return "0".to_owned();
        }
        let mut out = String::with_capacity(self.digits.len() + 8);
        if self.negative {
            out.push('-');
        }
        if self.format == Format::BinarySI && !self.magnitude_above(b"1023") {
            self.format = Format::DecimalSI;
        }
        if self.format == Format::BinarySI && self.exponent >= 0 {
            // At most the largest int64, so a u64.
            let mut value = self.digits.iter().fold(0u64, |value, digit| {
                value.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'))
            });
            for _ in 0..self.exponent {
                value = value.wrapping_mul(10);
            }
            let mut power = 0;
            while value >= 1024 && value % 1024 == 0 {
                value /= 1024;
                power += 1;
            }
            out.push_str(&value.to_string());
            out.push_str(
                ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .get(power)
                    .unwrap_or(&""),
            );
            return out;
        }
        let format = match self.format {
            Format::BinarySI => Format::DecimalSI,
            other => other,
        };
        // Down to a multiple of three, the digits taking up the rest.
        let exponent = self.exponent.div_euclid(3) * 3;
        out.extend(self.digits.iter().map(|&digit| char::from(digit)));
        for _ in exponent..self.exponent {
            out.push('0');
        }
        match format {
            Format::DecimalSI => out.push_str(match exponent {
                -9 => "n",
                -6 => "u",
                -3 => "m",
                3 => "k",
                6 => "M",
                9 => "G",
                12 => "T",
                15 => "P",
                18 => "E",
                // Go has no suffix for other powers, and writes none.
                _ => "",
            }),
            _ if exponent == 0 => {}
            _ => {
                out.push('e');
                out.push_str(&(exponent as i32).to_string());
            }
        }
        out
    }
}

/// `digits` × `factor`, in place.
fn multiply(digits: &mut Vec<u8>, factor: u32) {
    let mut carry = 0u32;
    for digit in digits.iter_mut().rev() {
        let product = u32::from(*digit - b'0') * factor + carry;
        *digit = b'0' + (product % 10) as u8;
        carry = product / 10;
    }
    while carry > 0 {
        digits.insert(0, b'0' + (carry % 10) as u8);
        carry /= 10;
    }
}

/// `digits` + 1, in place.
fn increment(digits: &mut Vec<u8>) {
    for digit in digits.iter_mut().rev() {
        if *digit == b'9' {
            *digit = b'0';
        } else {
            *digit += 1;
            return;
        }
    }
    digits.insert(0, b'1');
}

#[cfg(test)]
mod tests;
