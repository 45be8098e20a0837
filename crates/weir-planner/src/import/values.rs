//! Values in an allocation file: resources in any of the syntaxes
//! `FairSchedulerConfiguration.parseResourceConfigValue` reads.

use weir_model::cluster_file::LimitSpec;
use weir_model::PartialResources;

/// A resource value in any of the allocation file's syntaxes.
pub fn parse_resources(text: &str) -> Result<LimitSpec, String> {
    let t = text.trim();
    let bad = |why: &str| {
        format!("`{t}` {why}; write e.g. \"8192 mb, 4 vcores\", \"25%\" or \"memory-mb=8192, vcores=4\"")
    };
    let percent = |s: &str| s.trim().strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok());
    if let Some(p) = percent(t).filter(|_| !t.contains(',')) {
        return Ok(LimitSpec::Percent(format!("{p}%")));
    }
    let mut r = PartialResources::default();
    let mut percents = Vec::new();
    for part in t.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => (k.trim().to_ascii_lowercase(), v.trim().to_string()),
            None => {
                // Old format: "1024 mb", "4 vcores", "50% cpu".
                let split =
                    part.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '%')).unwrap_or(part.len());
                let (n, unit) = part.split_at(split);
                let key = match unit.trim().to_ascii_lowercase().as_str() {
                    "mb" | "memory" => "memory-mb",
                    "vcores" | "vcore" | "cpu" => "vcores",
                    _ => return Err(bad("has a part that is neither mb, vcores, cpu nor memory")),
                };
                (key.to_string(), n.trim().to_string())
            }
        };
        if let Some(p) = percent(&value) {
            percents.push(p);
            continue;
        }
        let n: u64 = value.parse().map_err(|_| bad("has a value that is not a whole number"))?;
        match key.as_str() {
            "memory-mb" | "memory" => r.memory = Some(n),
            "vcores" => r.cpu = Some(n.saturating_mul(1000)),
            "yarn.io/gpu" => r.gpu = Some(n),
            _ => return Err(bad(&format!("names `{key}`, which weir does not schedule"))),
        }
    }
    match percents.as_slice() {
        [] if r == PartialResources::default() => Err(bad("is empty")),
        [] => Ok(LimitSpec::Absolute(r)),
        [p, rest @ ..] if rest.iter().all(|q| q == p) && r == PartialResources::default() => {
            Ok(LimitSpec::Percent(format!("{p}%")))
        }
        _ => Err(bad("mixes different percentages (or percentages and amounts), which weir cannot express")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_values_in_every_syntax() {
        let abs = |cpu, memory, gpu| Ok(LimitSpec::Absolute(PartialResources { cpu, memory, gpu }));
        assert_eq!(parse_resources("10000 mb,0vcores"), abs(Some(0), Some(10000), None));
        assert_eq!(parse_resources(" 2048 mb, 2 vcores "), abs(Some(2000), Some(2048), None));
        assert_eq!(parse_resources("vcores=4, memory-mb=8192"), abs(Some(4000), Some(8192), None));
        assert_eq!(parse_resources("memory-mb=8192, yarn.io/gpu=2"), abs(None, Some(8192), Some(2)));
        assert_eq!(parse_resources("25%"), Ok(LimitSpec::Percent("25%".into())));
        assert_eq!(parse_resources("12.5% cpu, 12.5% memory"), Ok(LimitSpec::Percent("12.5%".into())));
        assert_eq!(parse_resources("vcores=50%, memory-mb=50%"), Ok(LimitSpec::Percent("50%".into())));
        for bad in ["", "10% cpu, 20% memory", "5 gb", "vcores=x", "fpga=1, vcores=2"] {
            assert!(parse_resources(bad).is_err(), "{bad:?} should fail");
        }
    }
}
