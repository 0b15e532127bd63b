//! Unit tests of action parsing.
use super::*;
