//! What a module's first eight bytes say it is, checked before compiling: wasmtime's own refusal of
//! bytes that are no WebAssembly at all is a multi-line dump of byte arrays (`expected=[\n 0x00,\n
//! 0x61, ...`), which a PolicyModule's condition would carry to whoever pushed the wrong file.

use anyhow::{Result, bail};

/// Every WebAssembly binary begins `\0asm`.
const MAGIC: &[u8] = b"\0asm";
/// A core module's version (1) and layer (0).
const CORE_MODULE: &[u8] = b"\x01\0\0\0";
/// How many of the first bytes a refusal shows.
const SHOWN: usize = 8;

/// Refuses, in words, bytes that are no WebAssembly, and a core module, which is not a component.
/// Anything else beginning `\0asm` is left for the compiler to judge.
pub fn check(bytes: &[u8]) -> Result<()> {
    if !bytes.starts_with(MAGIC) {
        bail!("not a WebAssembly component: {}, where a component begins 00 61 73 6d (\"\\0asm\")", first_bytes(bytes));
    }
    if bytes[MAGIC.len()..].starts_with(CORE_MODULE) {
        bail!(
            "this is a core WebAssembly module, not a component; build it with `sunk policy build` \
             (or turn it into one with `wasm-tools component new`)"
        );
    }
    Ok(())
}

/// `its first bytes are 3c 21 44 4f 43 54 59 50 (text: "<!DOCTYP"; ...)`, or what the bytes look like.
fn first_bytes(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "it is empty".into();
    }
    let shown = &bytes[..bytes.len().min(SHOWN)];
    let hex: Vec<String> = shown.iter().map(|byte| format!("{byte:02x}")).collect();
    let seems = match bytes {
        [0x1f, 0x8b, ..] => " (gzip-compressed data: decompress it)".to_owned(),
        [b'P', b'K', 3, 4, ..] => " (a zip archive: unpack it)".to_owned(),
        _ if shown.iter().all(|byte| byte.is_ascii_graphic() || *byte == b' ') => {
            format!(" (text: {:?}; base64 or a web page, perhaps)", String::from_utf8_lossy(shown))
        }
        _ => String::new(),
    };
    format!("its first bytes are {}{seems}", hex.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_that_are_no_webassembly_are_refused_in_words_on_one_line() {
        let cases: [(&[u8], &str); 6] = [
            (b"", "it is empty"),
            (b"<!DOCTYPE html><html>", r#"3c 21 44 4f 43 54 59 50 (text: "<!DOCTYP"; base64 or a web page"#),
            (b"AGFzbQ0AAQA=", r#"41 47 46 7a 62 51 30 41 (text: "AGFzbQ0A"; base64"#),
            (b"\x1f\x8b\x08\0\0\0\0\0\0\x03", "1f 8b 08 00 00 00 00 00 (gzip-compressed data"),
            (b"PK\x03\x04rest", "50 4b 03 04 72 65 73 74 (a zip archive"),
            (
                b"\0as\0\x0d\0\x01\0",
                "its first bytes are 00 61 73 00 0d 00 01 00, where a component begins 00 61 73 6d",
            ),
        ];
        for (bytes, says) in cases {
            let refusal = check(bytes).unwrap_err().to_string();
            assert!(refusal.starts_with("not a WebAssembly component: "), "{refusal}");
            assert!(refusal.contains(says), "{bytes:?}: {refusal}");
            assert!(!refusal.contains('\n') && refusal.len() < 200, "one short line: {refusal}");
        }
    }

    #[test]
    fn a_core_module_is_told_how_to_become_a_component_and_a_component_passes() {
        let core = check(b"\0asm\x01\0\0\0").unwrap_err().to_string();
        assert!(core.contains("core WebAssembly module, not a component"), "{core}");
        check(b"\0asm\x0d\0\x01\0").unwrap();
    }
}
