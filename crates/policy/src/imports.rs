//! What a policy may import: only the host interface of its own WIT package.

use anyhow::{Result, bail};
use wasmtime::Engine;
use wasmtime::component::Component;
use wasmtime::component::types::ComponentItem;

/// The one interface with functions a policy may import.
const HOST: &str = "sunk:policy/host@0.1.0";
/// Interfaces of the package that hold only types may appear as imports too.
const PACKAGE: &str = "sunk:policy/";
const VERSION: &str = "@0.1.0";

/// Refuses a component that imports anything but [`HOST`] (and types-only interfaces of the package),
/// naming the first offending import.
pub(crate) fn check(component: &Component, engine: &Engine) -> Result<()> {
    for (name, import) in component.component_type().imports(engine) {
        if name == HOST || (is_package_interface(name) && is_types_only(&import.ty, engine)) {
            continue;
        }
        bail!("the module imports `{name}`; policies may only import `{HOST}`");
    }
    Ok(())
}

fn is_package_interface(name: &str) -> bool {
    name.starts_with(PACKAGE) && name.ends_with(VERSION)
}

fn is_types_only(item: &ComponentItem, engine: &Engine) -> bool {
    match item {
        ComponentItem::ComponentInstance(instance) => {
            instance.exports(engine).all(|(_, export)| matches!(export.ty, ComponentItem::Type(_)))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A component whose only content is an import of `name` as an instance with no exports.
    fn importing(name: &str) -> Vec<u8> {
        let mut bytes = b"\0asm\x0d\0\x01\0".to_vec();
        // Type section: one instance type without declarations.
        bytes.extend([0x07, 0x03, 0x01, 0x42, 0x00]);
        // Import section: `name` as an instance of type 0.
        let len = u8::try_from(name.len()).unwrap();
        bytes.extend([0x0a, len + 5, 0x01, 0x00, len]);
        bytes.extend(name.as_bytes());
        bytes.extend([0x05, 0x00]);
        bytes
    }

    fn check_import(name: &str) -> Result<()> {
        let engine = Engine::default();
        let component = Component::new(&engine, importing(name)).unwrap();
        check(&component, &engine)
    }

    #[test]
    fn only_the_host_interface_and_types_of_the_package() {
        check_import(HOST).unwrap();
        check_import("sunk:policy/job-types@0.1.0").unwrap();
        for name in ["wasi:cli/environment@0.2.0", "sunk:policy/job-types@0.2.0", "sunk:other/host@0.1.0"] {
            let error = check_import(name).unwrap_err().to_string();
            assert!(error.contains(&format!("`{name}`")), "{error}");
        }
    }
}
