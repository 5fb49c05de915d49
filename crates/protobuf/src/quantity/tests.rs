use super::{FORMAT, NUMERIC, SUFFIX, canonical, from_message};
use crate::Error;

/// What apimachinery v0.37.2's `ParseQuantity` and `Quantity.String` make of each input, as
/// a Go program printed them.
const GO: &[(&str, Result<&str, &str>)] = &[
    ("0", Ok("0")),
    ("0n", Ok("0")),
    ("0Ki", Ok("0")),
    ("-0", Ok("0")),
    ("+0", Ok("0")),
    ("1", Ok("1")),
    ("+1", Ok("+1")),
    ("01", Ok("01")),
    ("01Ki", Ok("01Ki")),
    ("1Ki", Ok("1Ki")),
    ("8Ki", Ok("8Ki")),
    ("1024Ki", Ok("1Mi")),
    ("1025Ki", Ok("1025Ki")),
    ("1024Mi", Ok("1Gi")),
    ("7Mi", Ok("7Mi")),
    ("3Ei", Ok("3Ei")),
    ("4Pi", Ok("4Pi")),
    ("1Pi", Ok("1Pi")),
    ("100m", Ok("100m")),
    ("0.1", Ok("100m")),
    (".5", Ok("500m")),
    (".", Ok("0")),
    (".Ki", Ok("0")),
    ("k", Ok("0")),
    ("e5", Ok("0")),
    ("-", Ok("0")),
    ("1.5Gi", Ok("1536Mi")),
    ("1.Ki", Ok("1.Ki")),
    ("1.G", Ok("1.G")),
    ("1000", Ok("1k")),
    ("1000M", Ok("1G")),
    ("1000E", Ok("1")),
    ("1E", Ok("1E")),
    ("1e3", Ok("1e3")),
    ("1E3", Ok("1E3")),
    ("1e", Err(SUFFIX)),
    ("1i", Err(SUFFIX)),
    ("1ki", Err(SUFFIX)),
    ("1.5", Ok("1500m")),
    ("1e-10", Ok("1e-9")),
    (".001Ki", Ok("1024m")),
    (".000001Ki", Ok("1024u")),
    (".000000000001Ki", Ok("2n")),
    ("-.000000000001Ki", Ok("-2n")),
    ("1n", Ok("1n")),
    ("0.0000000001", Ok("1n")),
    ("-1Ki", Ok("-1Ki")),
    ("-1023", Ok("-1023")),
    ("-1.5Ki", Ok("-1536")),
    ("1023.5Ki", Ok("1048064")),
    ("0.5Ki", Ok("512")),
    ("9223372036854775807", Ok("9223372036854775807")),
    ("9223372036854775808", Ok("9223372036854775808")),
    ("9223372036854775807Ki", Ok("9223372036854775807")),
    ("8Ei", Ok("9223372036854775807")),
    ("100000000000000000000", Ok("100E")),
    (
        "123456789012345678901234567890",
        Ok("123456789012345678901234567890"),
    ),
    ("1.1e-3", Ok("1100e-6")),
    ("12e6", Ok("12e6")),
    ("12e+6", Ok("12e+6")),
    ("12e-6", Ok("12e-6")),
    ("+5e-3", Ok("+5e-3")),
    ("1e+", Err(SUFFIX)),
    ("1e-", Err(SUFFIX)),
    ("1.e5", Ok("100e3")),
    ("5Ei", Ok("5Ei")),
    ("16318504Ki", Ok("16318504Ki")),
    ("128Mi", Ok("128Mi")),
    ("1500m", Ok("1500m")),
    ("1.0E", Ok("1E")),
    ("0.0Ki", Ok("0")),
    ("--1", Err(SUFFIX)),
    ("1..5", Err(FORMAT)),
    ("1a", Err(FORMAT)),
    (" 1", Err(FORMAT)),
    ("1 ", Err(FORMAT)),
    ("1e2147483647", Ok("10e2147483646")),
];

#[test]
fn quantities_read_and_write_as_apimachinery_does() {
    for &(input, expected) in GO {
        let found = canonical(input.as_bytes());
        match (expected, &found) {
            (Ok(text), Ok(found)) => assert_eq!(found, text, "{input:?}"),
            (Err(message), Err(Error::Malformed(found))) => {
                assert_eq!(found, &message, "{input:?}");
            }
            _ => panic!("{input:?}: Go {expected:?}, kinformer {found:?}"),
        }
    }
}

#[test]
fn text_go_keeps_is_borrowed_and_text_go_rewrites_is_not() {
    assert!(matches!(
        canonical(b"100m"),
        Ok(std::borrow::Cow::Borrowed("100m"))
    ));
    assert!(matches!(
        canonical(b"1Ki"),
        Ok(std::borrow::Cow::Borrowed("1Ki"))
    ));
    assert!(matches!(canonical(b"0.1"), Ok(std::borrow::Cow::Owned(text)) if text == "100m"));
}

#[test]
fn a_number_with_no_digit_off_go_s_fast_path_is_refused_as_go_refuses_it() {
    // `Pi` and `Ei` always take `inf.Dec`'s path, which needs a digit; so does a scale under 1n.
    for input in ["Pi", ".Ei", "e-10", "-.e-12"] {
        assert_eq!(
            canonical(input.as_bytes()),
            Err(Error::Malformed(NUMERIC)),
            "{input:?}"
        );
    }
}

#[test]
fn huge_exponents_and_long_numbers_take_no_time() {
    // Go's `inf.Dec` would build 10^2000000000; this moves an exponent.
    assert_eq!(canonical(b"1e-2000000000").as_deref(), Ok("1e-9"));
    assert_eq!(
        canonical(b"15e2000000000").as_deref(),
        Ok("1500e1999999998")
    );
    let long = format!("{}Ki", "9".repeat(100_000));
    assert_eq!(
        canonical(long.as_bytes()).as_deref(),
        Ok("9223372036854775807")
    );
}

#[test]
fn a_message_is_read_as_go_s_unmarshal_reads_it() {
    // No field 1: zero.
    assert_eq!(from_message(b"").as_deref(), Ok("0"));
    // Twice: the last wins, and each must parse.
    assert_eq!(from_message(b"\x0a\x011\x0a\x030.1").as_deref(), Ok("100m"));
    assert_eq!(
        from_message(b"\x0a\x01x\x0a\x011"),
        Err(Error::Malformed(FORMAT))
    );
    // Another field is skipped; field 1 with another wire type is refused.
    assert_eq!(from_message(b"\x10\x05\x0a\x012").as_deref(), Ok("2"));
    assert!(from_message(b"\x08\x05").is_err());
}
