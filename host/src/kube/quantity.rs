//! Kubernetes resource quantities ("500m", "2Gi", "1e3") as plain numbers.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The quantity scaled by `unit` (1000 for millicores, 1 for bytes), rounded up; None when the text
/// is not a quantity, or is one beyond what a u64 holds. Exact: in integers, because in floating point
/// `64727m` is 64727.00000000001 millicores, which rounds up to 64728.
pub fn scaled(quantity: &Quantity, unit: u64) -> Option<u64> {
    let text = quantity.0.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number = number.strip_prefix('+').unwrap_or(number);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |part: &str| part.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let significant = format!("{whole}{fraction}");
    let significant = significant.trim_start_matches('0');
    let mantissa: u128 = if significant.is_empty() { 0 } else { significant.parse().ok()? };
    let mut numerator = mantissa.checked_mul(u128::from(unit))?;
    let mut denominator = 10u128.checked_pow(u32::try_from(fraction.len()).ok()?)?;
    match multiplier(suffix)? {
        Multiplier::Decimal(exponent) if exponent >= 0 => {
            numerator = numerator.checked_mul(10u128.checked_pow(exponent.unsigned_abs())?)?
        }
        Multiplier::Decimal(exponent) => {
            denominator = denominator.checked_mul(10u128.checked_pow(exponent.unsigned_abs())?)?
        }
        Multiplier::Binary(power) => numerator = numerator.checked_mul(1024u128.checked_pow(power)?)?,
    }
    u64::try_from(numerator.div_ceil(denominator)).ok()
}

enum Multiplier {
    /// 10 to this power.
    Decimal(i32),
    /// 1024 to this power.
    Binary(u32),
}

fn multiplier(suffix: &str) -> Option<Multiplier> {
    Some(match suffix {
        "" => Multiplier::Decimal(0),
        "n" => Multiplier::Decimal(-9),
        "u" => Multiplier::Decimal(-6),
        "m" => Multiplier::Decimal(-3),
        "k" => Multiplier::Decimal(3),
        "M" => Multiplier::Decimal(6),
        "G" => Multiplier::Decimal(9),
        "T" => Multiplier::Decimal(12),
        "P" => Multiplier::Decimal(15),
        "E" => Multiplier::Decimal(18),
        "Ki" => Multiplier::Binary(1),
        "Mi" => Multiplier::Binary(2),
        "Gi" => Multiplier::Binary(3),
        "Ti" => Multiplier::Binary(4),
        "Pi" => Multiplier::Binary(5),
        "Ei" => Multiplier::Binary(6),
        exponent if exponent.starts_with(['e', 'E']) => Multiplier::Decimal(exponent[1..].parse().ok()?),
        _ => return None,
    })
}

/// CPU in millicores.
pub fn millicores(quantity: &Quantity) -> Option<u64> {
    scaled(quantity, 1000)
}

/// Memory (or any count) in whole units.
pub fn units(quantity: &Quantity) -> Option<u64> {
    scaled(quantity, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(text: &str) -> Quantity {
        Quantity(text.to_string())
    }

    #[test]
    fn parses_cpu_and_memory() {
        assert_eq!(millicores(&q("500m")), Some(500));
        assert_eq!(millicores(&q("2")), Some(2000));
        assert_eq!(millicores(&q("0.25")), Some(250));
        assert_eq!(units(&q("2Gi")), Some(2 * 1024 * 1024 * 1024));
        assert_eq!(units(&q("100M")), Some(100_000_000));
        assert_eq!(units(&q("1e3")), Some(1000));
        assert_eq!(units(&q("12x")), None);
        assert_eq!(units(&q("-1")), None);
        assert_eq!(millicores(&q("64727m")), Some(64727), "not 64728, as floating point had it");
        assert_eq!(millicores(&q("1100m")), Some(1100));
        assert_eq!(millicores(&q("0.0005")), Some(1), "rounded up");
        assert_eq!(units(&q("1.5Gi")), Some(3 << 29));
        assert_eq!(units(&q("2E")), Some(2_000_000_000_000_000_000));
        assert_eq!(units(&q("1e-3")), Some(1));
        assert_eq!(
            (units(&q("1e400")), units(&q("20E")), units(&q(".")), units(&q("1.2.3"))),
            (None, None, None, None)
        );
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]

            #[test]
            fn a_whole_number_with_a_suffix_is_that_many_units(n in 0u64..1_000_000, suffix in 0usize..7) {
                let (text, unit) = [("", 1), ("k", 1000), ("M", 1_000_000), ("Ki", 1024), ("Mi", 1 << 20), ("Gi", 1 << 30), ("G", 1_000_000_000)][suffix];
                prop_assert_eq!(units(&q(&format!("{n}{text}"))), Some(n * unit));
                prop_assert_eq!(millicores(&q(&format!("{n}m"))), Some(n));
            }

            #[test]
            fn any_text_is_a_quantity_or_none_never_a_panic(text in "[0-9.+eE-]{0,12}[a-zA-Z]{0,3}|\\PC{0,20}") {
                let _ = (units(&q(&text)), millicores(&q(&text)));
            }
        }
    }
}
