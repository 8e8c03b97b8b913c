//! One module per top-level command. Add `pub(crate) mod <command>;` here and a variant in `main.rs`.

pub(crate) mod admin;
pub(crate) mod chat;
pub(crate) mod demo;
pub(crate) mod schema;
pub(crate) mod sessions;
pub(crate) mod state;
