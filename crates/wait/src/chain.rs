use std::error::Error as StdError;
use std::fmt;

/// Displays an error followed by its sources, `outer: inner: root`.
///
/// kinformer's errors keep their cause as a source rather than in their own message, so a log
/// line that should say why prints the chain: `warn!(error = %ErrorChain(&error), "...")`.
///
/// ```
/// use kinformer_wait::ErrorChain;
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("the watch failed")]
/// struct WatchFailed(#[source] std::io::Error);
///
/// let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
/// let error = WatchFailed(refused);
/// assert_eq!(error.to_string(), "the watch failed");
/// assert_eq!(ErrorChain(&error).to_string(), "the watch failed: connection refused");
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn StdError + 'a));

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Some errors print their source in their own message too (kube-client's do); a cause
        // the previous message already shows is not printed again.
        let mut shown = self.0.to_string();
        f.write_str(&shown)?;
        let mut source = self.0.source();
        while let Some(cause) = source {
            let text = cause.to_string();
            if !shown.contains(&text) {
                write!(f, ": {text}")?;
            }
            shown = text;
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("list failed")]
    struct ListFailed(#[source] std::io::Error);

    /// Like kube-client's errors: the message already shows the cause it keeps as a source.
    #[derive(Debug, thiserror::Error)]
    #[error("request failed: {0}")]
    struct RequestFailed(#[source] ListFailed);

    #[test]
    fn the_chain_shows_every_source_after_the_error() {
        let error = ListFailed(std::io::Error::other("connection refused"));
        assert_eq!(error.to_string(), "list failed");
        assert_eq!(
            ErrorChain(&error).to_string(),
            "list failed: connection refused"
        );
        assert_eq!(
            format!("{:?}", ErrorChain(&error)),
            "list failed: connection refused"
        );
    }

    #[test]
    fn a_cause_the_previous_message_already_shows_is_not_repeated() {
        let error = RequestFailed(ListFailed(std::io::Error::other("connection refused")));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "request failed: list failed: connection refused"
        );
    }

    #[test]
    fn an_error_without_a_source_is_its_own_message() {
        let error = std::io::Error::other("watch closed");
        assert_eq!(ErrorChain(&error).to_string(), "watch closed");
    }
}
