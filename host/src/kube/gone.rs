//! Writes to an object that is no longer there. A controller acts on what it saw a moment ago: the
//! object may be deleted (404), or deleted and created again under its name, which a uid precondition
//! turns into a conflict (409). Either way the write has nothing left to do.

/// Whether the API server answered that the object (or its kind) is not there.
pub fn is_gone(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Whether the object is not there, or its uid precondition failed: another object has its name now.
pub fn is_gone_or_replaced(error: &kube::Error) -> bool {
    is_gone(error) || matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// `result` with "not there" counted as done.
pub fn gone_is_done<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Err(error) if is_gone(&error) => Ok(()),
        other => other.map(drop),
    }
}

/// `result` with "not there" and "another object under its name" (a failed uid precondition) counted
/// as done.
pub fn gone_or_replaced_is_done<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Err(error) if is_gone_or_replaced(&error) => Ok(()),
        other => other.map(drop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(code: u16) -> kube::Result<u8> {
        let status = kube::core::Status::failure("refused", "Refused").with_code(code);
        Err(kube::Error::Api(Box::new(status)))
    }

    #[test]
    fn only_not_found_counts_as_gone() {
        assert!(gone_is_done(refused(404)).is_ok());
        assert!(gone_is_done(refused(409)).is_err());
        assert!(gone_is_done(refused(500)).is_err());
        assert!(gone_is_done(Ok(7)).is_ok());
    }

    #[test]
    fn a_conflict_counts_as_replaced() {
        assert!(gone_or_replaced_is_done(refused(404)).is_ok());
        assert!(gone_or_replaced_is_done(refused(409)).is_ok());
        assert!(gone_or_replaced_is_done(refused(429)).is_err());
    }
}
