//! Kubernetes resource quantities ("500m", "2Gi", "1e3") as plain numbers.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The quantity scaled by `unit` (1000 for millicores, 1 for bytes), rounded up;
/// None when the text is not a quantity.
pub fn scaled(quantity: &Quantity, unit: f64) -> Option<u64> {
    let text = quantity.0.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let number: f64 = number.parse().ok()?;
    let multiplier = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exponent if exponent.starts_with(['e', 'E']) => 10f64.powi(exponent[1..].parse().ok()?),
        _ => return None,
    };
    let value = number * multiplier * unit;
    (value.is_finite() && value >= 0.0).then(|| value.ceil() as u64)
}

/// CPU in millicores.
pub fn millicores(quantity: &Quantity) -> Option<u64> {
    scaled(quantity, 1000.0)
}

/// Memory (or any count) in whole units.
pub fn units(quantity: &Quantity) -> Option<u64> {
    scaled(quantity, 1.0)
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
    }
}
