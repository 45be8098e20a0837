//! Resource vectors: `cpu` in millicores, `memory` in MiB, `gpu` as a count. All integer.

use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use serde::{Deserialize, Deserializer, Serialize};

/// One of the resource kinds weir schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceKind {
    Cpu,
    Memory,
    Gpu,
}

impl ResourceKind {
    pub const ALL: [ResourceKind; 3] = [ResourceKind::Cpu, ResourceKind::Memory, ResourceKind::Gpu];

    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Cpu => "cpu",
            ResourceKind::Memory => "memory",
            ResourceKind::Gpu => "gpu",
        }
    }
}

/// A resource vector. Arithmetic saturates at zero and at `u64::MAX` ("unbounded").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Resources {
    pub cpu: u64,
    pub memory: u64,
    pub gpu: u64,
}

impl Resources {
    pub const ZERO: Resources = Resources { cpu: 0, memory: 0, gpu: 0 };
    /// No bound on any resource.
    pub const UNBOUNDED: Resources = Resources { cpu: u64::MAX, memory: u64::MAX, gpu: u64::MAX };

    pub const fn new(cpu: u64, memory: u64, gpu: u64) -> Resources {
        Resources { cpu, memory, gpu }
    }

    pub fn get(&self, kind: ResourceKind) -> u64 {
        match kind {
            ResourceKind::Cpu => self.cpu,
            ResourceKind::Memory => self.memory,
            ResourceKind::Gpu => self.gpu,
        }
    }

    pub fn set(&mut self, kind: ResourceKind, v: u64) {
        match kind {
            ResourceKind::Cpu => self.cpu = v,
            ResourceKind::Memory => self.memory = v,
            ResourceKind::Gpu => self.gpu = v,
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Resources::ZERO
    }

    /// Every component of `self` is at most the same component of `other`.
    pub fn fits_in(&self, other: &Resources) -> bool {
        self.cpu <= other.cpu && self.memory <= other.memory && self.gpu <= other.gpu
    }

    pub fn component_min(&self, o: &Resources) -> Resources {
        Resources::new(self.cpu.min(o.cpu), self.memory.min(o.memory), self.gpu.min(o.gpu))
    }

    pub fn component_max(&self, o: &Resources) -> Resources {
        Resources::new(self.cpu.max(o.cpu), self.memory.max(o.memory), self.gpu.max(o.gpu))
    }

    pub fn saturating_sub(&self, o: &Resources) -> Resources {
        Resources::new(
            self.cpu.saturating_sub(o.cpu),
            self.memory.saturating_sub(o.memory),
            self.gpu.saturating_sub(o.gpu),
        )
    }

    /// Multiply each component by `n`, saturating.
    pub fn times(&self, n: u64) -> Resources {
        Resources::new(self.cpu.saturating_mul(n), self.memory.saturating_mul(n), self.gpu.saturating_mul(n))
    }

    /// Scale each component by `f` and truncate, leaving unbounded components unbounded.
    pub fn scale(&self, f: f64) -> Resources {
        let s = |v: u64| if v == u64::MAX { u64::MAX } else { (v as f64 * f) as u64 };
        Resources::new(s(self.cpu), s(self.memory), s(self.gpu))
    }

    /// Round every component up to a multiple of the same component of `step` (0 = no rounding).
    pub fn round_up_to(&self, step: &Resources) -> Resources {
        let r =
            |v: u64, s: u64| if s <= 1 || v.is_multiple_of(s) { v } else { (v / s + 1).saturating_mul(s) };
        Resources::new(r(self.cpu, step.cpu), r(self.memory, step.memory), r(self.gpu, step.gpu))
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(self, o: Resources) -> Resources {
        Resources::new(
            self.cpu.saturating_add(o.cpu),
            self.memory.saturating_add(o.memory),
            self.gpu.saturating_add(o.gpu),
        )
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, o: Resources) {
        *self = *self + o;
    }
}

impl Sub for Resources {
    type Output = Resources;
    /// Saturating: a component never goes below zero.
    fn sub(self, o: Resources) -> Resources {
        self.saturating_sub(&o)
    }
}

impl SubAssign for Resources {
    fn sub_assign(&mut self, o: Resources) {
        *self = *self - o;
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: u64| if v == u64::MAX { "unbounded".to_string() } else { v.to_string() };
        write!(f, "{{cpu: {}, memory: {}", show(self.cpu), show(self.memory))?;
        if self.gpu != 0 {
            write!(f, ", gpu: {}", show(self.gpu))?;
        }
        write!(f, "}}")
    }
}

/// A resource map as written in files: any component may be left out.
/// `memory` takes MiB as a number, or a string with a unit (`512m`, `8g`, `1t`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartialResources {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<u64>,
    #[serde(default, deserialize_with = "memory_opt", skip_serializing_if = "Option::is_none")]
    pub memory: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<u64>,
}

impl PartialResources {
    /// Fill missing components with `missing`.
    pub fn or(&self, missing: u64) -> Resources {
        Resources::new(
            self.cpu.unwrap_or(missing),
            self.memory.unwrap_or(missing),
            self.gpu.unwrap_or(missing),
        )
    }

    pub fn from_resources(r: Resources) -> PartialResources {
        PartialResources { cpu: Some(r.cpu), memory: Some(r.memory), gpu: Some(r.gpu) }
    }
}

/// Parse a memory amount in MiB: a number, or a string with unit `m`, `g` or `t` (binary units).
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_suffix("ib").or_else(|| t.strip_suffix('i')).unwrap_or(&t).to_string();
    let (num, scale) = if let Some(n) = t.strip_suffix('t') {
        (n, 1024 * 1024)
    } else if let Some(n) = t.strip_suffix('g') {
        (n, 1024)
    } else if let Some(n) = t.strip_suffix('m') {
        (n, 1)
    } else {
        (t.as_str(), 1)
    };
    let bad = || {
        format!("`{s}` is not a memory amount: write MiB as a number, or a whole number with m, g or t (e.g. 512m, 8g)")
    };
    let n: u64 = num.trim().parse().map_err(|_| bad())?;
    n.checked_mul(scale).ok_or_else(bad)
}

fn memory_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(Option::<Memory>::deserialize(d)?.map(|m| m.0))
}

/// A memory amount as written: MiB as a whole number, or a string with a unit. A visitor rather
/// than an untagged enum, so a bad value gets a message that says what to write.
struct Memory(u64);

impl<'de> Deserialize<'de> for Memory {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct MemoryVisitor;
        impl serde::de::Visitor<'_> for MemoryVisitor {
            type Value = Memory;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a memory amount: MiB as a whole number, or a whole number with m, g or t (e.g. 512m, 8g)")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Memory, E> {
                Ok(Memory(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Memory, E> {
                u64::try_from(v)
                    .map(Memory)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Memory, E> {
                parse_memory(v).map(Memory).map_err(E::custom)
            }
        }
        d.deserialize_any(MemoryVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_units() {
        assert_eq!(parse_memory("512m"), Ok(512));
        assert_eq!(parse_memory("8g"), Ok(8192));
        assert_eq!(parse_memory("8Gi"), Ok(8192));
        assert_eq!(parse_memory("1t"), Ok(1024 * 1024));
        assert_eq!(parse_memory("300"), Ok(300));
        assert!(parse_memory("8x").is_err());
        assert!(parse_memory("-1g").is_err());
    }

    #[test]
    fn arithmetic_saturates() {
        let a = Resources::new(1, 2, 0);
        let b = Resources::new(3, 1, 0);
        assert_eq!(a - b, Resources::new(0, 1, 0));
        assert_eq!(Resources::UNBOUNDED + a, Resources::UNBOUNDED);
        assert!(a.fits_in(&Resources::new(1, 2, 0)));
        assert!(!b.fits_in(&a));
    }

    #[test]
    fn rounding_up() {
        let step = Resources::new(1000, 1024, 0);
        assert_eq!(Resources::new(1, 1025, 1).round_up_to(&step), Resources::new(1000, 2048, 1));
        assert_eq!(Resources::new(2000, 1024, 0).round_up_to(&step), Resources::new(2000, 1024, 0));
    }
}
