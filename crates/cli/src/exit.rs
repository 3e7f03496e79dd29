//! The exit statuses of tally's commands, in one place. `tally cc` / `tally c++` are not
//! among them: they exit with clang's status.

/// An exit status. Which commands give which:
///
/// | status | given by |
/// | --- | --- |
/// | 0 `Ok` | every command, when done (`diff`, `check`: no count differs) |
/// | 1 `Differs` | `diff` (some count differs), `check` (some count differs from the oracle's), `trace` (some thread's regeneration stopped early; with `--paths`, also paths that could not be counted) |
/// | 2 `Error` | every command on an error (`tally: error: ...`); `merge --by-program` when some inputs could not be merged (the rest is) |
/// | 3 `Inconsistent` | `report`, `paths`, `placements`, `show`, `html`: functions with inconsistent counts (named on stderr), the rest complete; `report`/`html --trace`: a thread's regeneration stopped early |
/// | 4 `Unfinished` | `report`, `paths`, `placements`, `show`, `html`: an unfinished continuous-mode profile |
/// | 5 `Raced` | the same commands: a profile of non-atomic code run multi-threaded |
/// | 6 `Signaled` | the same commands: a profile written by the fatal-signal handler |
///
/// When several of 3-6 apply, the first of 4, 6, 5, 3 is given (each cause has its stderr
/// line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum Exit {
    /// Done; for `diff` and `check`, no count differs.
    Ok = 0,
    /// `diff`, `check`: some count differs; `trace`: regeneration stopped early (or, with
    /// `--paths`, some paths could not be counted).
    Differs = 1,
    /// An error; `merge --by-program`: some inputs could not be merged.
    Error = 2,
    /// The output is complete except for functions whose counts are inconsistent (named on
    /// stderr), or covers the regenerated part of a trace only.
    Inconsistent = 3,
    /// An unfinished continuous-mode profile (the program was killed): exact for every
    /// function that was not active at the kill; those whose counts break the flow law are
    /// named on stderr as interrupted.
    Unfinished = 4,
    /// A profile whose code built without atomic increments ran in a multi-threaded process
    /// (header flag `raced`): any of its counts may have lost updates, balanced or not.
    Raced = 5,
    /// A profile written by the fatal-signal handler: functions active at the signal (in any
    /// thread) may have inexact counts, named as inconsistent when their flow does not
    /// balance.
    Signaled = 6,
}

impl Exit {
    /// The status to exit with.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// `self` when `cond` holds, else [`Exit::Ok`].
    pub fn when(self, cond: bool) -> Exit {
        if cond {
            self
        } else {
            Exit::Ok
        }
    }
}
