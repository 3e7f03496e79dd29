//! Exact division by a constant without a division instruction: the arithmetic a SESE counter's
//! exit code uses to turn `d = ±(last - init)` into the trip count `k = d / |step|`.
//!
//! The instrumented IR is not optimized again (clang compiles it with `-disable-llvm-passes`),
//! so a `udiv` by a constant would stay a hardware division (20 to 90 cycles on x86-64) on
//! every exit of a counted loop. Since `d` is a multiple of `s = |step|` (`d = k · s`, with
//! `k · s < 2^w` when the front end checked the increments do not wrap), the division is
//! *exact*, and an exact division by `s = 2^t · o` (`o` odd) is a logical shift right by `t`
//! followed by a multiplication by `o`'s inverse modulo `2^w` (Granlund & Montgomery,
//! *Division by invariant integers using multiplication*, PLDI 1994, §9; LLVM's `udiv exact`
//! lowering): `d >> t = k · o` exactly, and `k · o · o⁻¹ ≡ k (mod 2^w)`, which is `k` since
//! `k < 2^w`. A power-of-two step needs the shift only, an odd step the multiplication only,
//! step ±1 neither.

/// How to divide exactly by a constant in `w`-bit arithmetic: `(d >> shift) * mul` modulo `2^w`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExactDiv {
    /// The number of trailing zero bits of the divisor.
    pub shift: u32,
    /// The inverse of the divisor's odd part modulo `2^w` (1 when the odd part is 1: no
    /// multiplication).
    pub mul: u64,
    /// The width `w` in bits (1 to 64).
    pub width: u32,
}

impl ExactDiv {
    /// The plan for dividing by `divisor` in `width`-bit arithmetic; `None` when the divisor is
    /// 0 or does not fit in `width` bits, or the width is not in 1..=64.
    pub fn new(divisor: u64, width: u32) -> Option<ExactDiv> {
        if divisor == 0 || !(1..=64).contains(&width) || divisor & !mask(width) != 0 {
            return None;
        }
        let shift = divisor.trailing_zeros();
        let odd = divisor >> shift;
        // Newton's iteration x <- x (2 - o x) doubles the number of correct low bits; x = o is
        // right to 3 bits (o · o ≡ 1 mod 8 for odd o), so five steps give 96 >= 64.
        let mut x = odd;
        for _ in 0..5 {
            x = x.wrapping_mul(2u64.wrapping_sub(odd.wrapping_mul(x)));
        }
        debug_assert_eq!(odd.wrapping_mul(x), 1);
        Some(ExactDiv {
            shift,
            mul: x & mask(width),
            width,
        })
    }

    /// `d / divisor` for a `w`-bit `d` that is a multiple of the divisor (what the emitted code
    /// computes; the reference for the tests).
    pub fn apply(self, d: u64) -> u64 {
        ((d & mask(self.width)) >> self.shift).wrapping_mul(self.mul) & mask(self.width)
    }
}

/// The `w` low bits.
pub fn mask(width: u32) -> u64 {
    if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plans_of_small_divisors() {
        assert_eq!(
            ExactDiv::new(1, 32),
            Some(ExactDiv {
                shift: 0,
                mul: 1,
                width: 32
            })
        );
        assert_eq!(
            ExactDiv::new(8, 64),
            Some(ExactDiv {
                shift: 3,
                mul: 1,
                width: 64
            })
        );
        // 3 · 0xAB = 0x201 ≡ 1 (mod 2^8).
        assert_eq!(
            ExactDiv::new(3, 8),
            Some(ExactDiv {
                shift: 0,
                mul: 0xAB,
                width: 8
            })
        );
        assert_eq!(
            ExactDiv::new(12, 16).map(|p| (p.shift, 3u64.wrapping_mul(p.mul) & 0xffff)),
            Some((2, 1))
        );
        assert_eq!(ExactDiv::new(0, 32), None);
        assert_eq!(ExactDiv::new(256, 8), None);
        assert_eq!(ExactDiv::new(1, 0), None);
        assert_eq!(ExactDiv::new(1, 65), None);
    }

    /// The exit code's arithmetic, as emitted: `p` advanced `k` times by `step` from `init` in
    /// `w` bits (wrapping around 0 and the signed boundary as it may), `d = ±(p - init)`.
    fn trip_count(width: u32, init: u64, step: i64, k: u64) -> u64 {
        let m = mask(width);
        let p = init.wrapping_add(k.wrapping_mul(step as u64)) & m;
        let mut d = p.wrapping_sub(init) & m;
        if step < 0 {
            d = d.wrapping_neg() & m;
        }
        ExactDiv::new(step.unsigned_abs(), width)
            .expect("valid step")
            .apply(d)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4000, failure_persistence: None, ..ProptestConfig::default() })]

        /// Every width 8..=64, every step with |step| < 2^(w-1) (what the front end accepts),
        /// any initial value, any trip count with k · |step| < 2^w.
        #[test]
        fn exact_division_gives_the_trip_count(
            width in 8u32..=64,
            init in any::<u64>(),
            step_bits in any::<u64>(),
            step_exp in 0u32..64,
            negative in any::<bool>(),
            k_bits in any::<u64>(),
        ) {
            // Steps of every magnitude, powers of two and odd parts included.
            let limit = (1u64 << (width - 1)) - 1;
            let mag = (step_bits >> (63 - step_exp.min(63))).clamp(1, limit);
            let step = if negative { -(mag as i64) } else { mag as i64 };
            let init = init & mask(width);
            // k · mag < 2^w: k <= (2^w - 1) / mag.
            let kmax = mask(width) / mag;
            let k = if kmax == u64::MAX { k_bits } else { k_bits % (kmax + 1) };
            prop_assert_eq!(trip_count(width, init, step, k), k);
        }

        /// Trip counts at the edges of the range: 0, 1 and the largest.
        #[test]
        fn extreme_trip_counts(width in 8u32..=64, mag in 1u64..1000, init in any::<u64>(), negative in any::<bool>()) {
            let mag = mag.min((1u64 << (width - 1)) - 1);
            let step = if negative { -(mag as i64) } else { mag as i64 };
            let init = init & mask(width);
            for k in [0, 1, mask(width) / mag] {
                prop_assert_eq!(trip_count(width, init, step, k), k);
            }
        }
    }

    /// It is not a general division: a non-multiple gives garbage (so the tests above test the
    /// multiplication, not a disguised `udiv`).
    #[test]
    fn not_a_general_division() {
        let p = ExactDiv::new(3, 32).unwrap();
        assert_ne!(p.apply(10), 10 / 3);
    }
}
