//! Which runner a connection is placed on and a call runs on: the server's own, or a paired
//! device's. Written `central` or `device:<uuid>` on the wire and in the database.

use crate::ids::DeviceId;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A runner: the central runner inside the server, or a paired device's runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum RunnerRef {
    /// The runner inside the server (`central`).
    Central,
    /// A paired device's runner (`device:<uuid>`).
    Device(DeviceId),
}

/// The text of [`RunnerRef::Central`].
pub const CENTRAL: &str = "central";
/// What a device runner's text starts with, before the device's id.
pub const DEVICE_PREFIX: &str = "device:";

impl RunnerRef {
    /// The device, for a device's runner.
    pub fn device(self) -> Option<DeviceId> {
        match self {
            RunnerRef::Central => None,
            RunnerRef::Device(id) => Some(id),
        }
    }

    /// Whether this is the central runner.
    pub fn is_central(self) -> bool {
        self == RunnerRef::Central
    }
}

impl fmt::Display for RunnerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunnerRef::Central => f.write_str(CENTRAL),
            RunnerRef::Device(id) => write!(f, "{DEVICE_PREFIX}{}", id.0.hyphenated()),
        }
    }
}

/// A runner reference that is neither `central` nor `device:` and a UUID.
#[derive(Debug, thiserror::Error)]
#[error("`{0}` is not a runner: expected `central` or `device:<uuid>`")]
pub struct UnknownRunner(pub String);

impl FromStr for RunnerRef {
    type Err = UnknownRunner;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == CENTRAL {
            return Ok(RunnerRef::Central);
        }
        s.strip_prefix(DEVICE_PREFIX)
            .and_then(|id| id.parse().ok())
            .map(RunnerRef::Device)
            .ok_or_else(|| UnknownRunner(s.to_owned()))
    }
}

impl TryFrom<String> for RunnerRef {
    type Error = UnknownRunner;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<RunnerRef> for String {
    fn from(runner: RunnerRef) -> Self {
        runner.to_string()
    }
}

impl From<DeviceId> for RunnerRef {
    fn from(device: DeviceId) -> Self {
        RunnerRef::Device(device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runner_reads_back_as_it_is_written() {
        let device =
            DeviceId(uuid::Uuid::parse_str("0193a5c2-7f00-7000-8000-000000000001").unwrap());
        for runner in [RunnerRef::Central, RunnerRef::Device(device)] {
            assert_eq!(runner.to_string().parse::<RunnerRef>().unwrap(), runner);
        }
        assert_eq!(
            RunnerRef::Device(device).to_string(),
            "device:0193a5c2-7f00-7000-8000-000000000001"
        );
    }

    #[test]
    fn anything_else_is_refused_with_what_was_expected() {
        for text in ["", "Central", "device:", "device:not-a-uuid", "laptop"] {
            let error = text.parse::<RunnerRef>().unwrap_err();
            assert!(error.to_string().contains("central"), "{error}");
        }
    }
}
