//! Runs: the queue a run waits on and the states it passes through.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::UnknownName;

/// The queue a run waits on. Interactive runs answer a person; background runs do later passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Queue {
    Interactive,
    Background,
}

impl Queue {
    pub const ALL: [Queue; 2] = [Queue::Interactive, Queue::Background];

    pub fn as_str(self) -> &'static str {
        match self {
            Queue::Interactive => "interactive",
            Queue::Background => "background",
        }
    }
}

impl fmt::Display for Queue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Queue {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Queue::ALL
            .into_iter()
            .find(|queue| queue.as_str() == text)
            .ok_or_else(|| UnknownName {
                kind: "queue",
                value: text.to_owned(),
            })
    }
}

/// Where a run is in its life. `Queued`, `Running` and `Parked` are open; the rest are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    /// Waiting on a delegated child; not waiting its turn.
    Parked,
    Succeeded,
    Failed,
    Canceled,
}

impl RunStatus {
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Queued,
        RunStatus::Running,
        RunStatus::Parked,
        RunStatus::Succeeded,
        RunStatus::Failed,
        RunStatus::Canceled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Queued => "queued",
            RunStatus::Running => "running",
            RunStatus::Parked => "parked",
            RunStatus::Succeeded => "succeeded",
            RunStatus::Failed => "failed",
            RunStatus::Canceled => "canceled",
        }
    }

    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RunStatus::Succeeded | RunStatus::Failed | RunStatus::Canceled
        )
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunStatus {
    type Err = UnknownName;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == text)
            .ok_or_else(|| UnknownName {
                kind: "run status",
                value: text.to_owned(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for queue in Queue::ALL {
            assert_eq!(queue.as_str().parse::<Queue>(), Ok(queue));
        }
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>(), Ok(status));
        }
        assert!("paused".parse::<RunStatus>().is_err());
    }
}
