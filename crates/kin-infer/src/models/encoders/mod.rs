//! Encoder families.

pub mod bert;
