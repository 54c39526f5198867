//! The chaos suite (being written).
