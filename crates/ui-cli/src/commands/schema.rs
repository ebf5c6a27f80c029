//! `uiblocks schema`: the JSON Schemas of the wire types, as `GET /api/schema` serves them.

use std::io::Write as _;

use anyhow::bail;
use ui_server::schema::{wire_schema, wire_types};

use crate::cli::SchemaArgs;

/// Prints the schema of the named type, or the type names one per line.
///
/// # Errors
/// When the type is unknown or standard output fails.
pub fn run(args: &SchemaArgs) -> anyhow::Result<u8> {
    let mut stdout = std::io::stdout().lock();
    match &args.type_name {
        None => {
            for name in wire_types() {
                writeln!(stdout, "{name}")?;
            }
        }
        Some(name) => {
            let Some(schema) = wire_schema(name) else {
                bail!(
                    "unknown type `{name}`; known types: {}",
                    wire_types().join(", ")
                );
            };
            serde_json::to_writer_pretty(&mut stdout, &schema)?;
            writeln!(stdout)?;
        }
    }
    Ok(0)
}
