//! The seed experiments as reusable functions, shared by the `[[example]]` programs, the tests
//! and the bench CLI.

pub mod cpu;
pub mod hackysack;
pub mod http;
