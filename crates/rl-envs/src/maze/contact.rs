//! MuJoCo's soft contact between the maze ball and the wall blocks, re-implemented for the
//! pure-Rust ball: frictionless (`condim` 1) sphere–box contacts with MuJoCo's default
//! `solref` (0.02, 1) and `solimp` (0.9, 0.95, 0.001, 0.5, 2), solved exactly.
//!
//! MuJoCo (Todorov, "Convex and analytically-invertible dynamics with contacts and
//! constraints", ICRA 2014; MuJoCo documentation, "Computation") finds the constraint forces
//! `f ≥ 0` of the active contacts (distance below the summed geom margins) by minimising
//!
//! ```text
//! ½ (a − a0)ᵀ M (a − a0) + Σ_i ½ D_i · min(0, J_i a − aref_i)²,      f_i = −D_i · min(0, J_i a − aref_i)
//! aref_i = −B (J_i v) − K · imp_i · (dist_i − margin),   D_i = 1 / R_i,   R_i = (1 − imp_i)/imp_i · (1/m)
//! K = 1 / (d_max² τ² ζ²),   B = 2 / (d_max τ),   τ = max(0.02, 2h), ζ = 1, d_max = 0.95
//! ```
//!
//! where `a0 = M⁻¹ f_smooth`, `J_i = −n_iᵀ` (`n_i` from the ball to the block) and `imp_i` is
//! MuJoCo's impedance sigmoid of `|dist_i − margin|`. With a handful of rows the optimum is found
//! exactly by enumerating active sets (the problem is strictly convex, so exactly one is
//! consistent).

/// MuJoCo's default `solref`: time constant and damping ratio.
const SOLREF: [f64; 2] = [0.02, 1.0];
/// MuJoCo's default `solimp`: d0, d_width, width, midpoint, power.
const SOLIMP: [f64; 5] = [0.9, 0.95, 0.001, 0.5, 2.0];
const MINVAL: f64 = 1e-15;
const MINIMP: f64 = 1e-4;
const MAXIMP: f64 = 0.9999;

/// One active contact row.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// Jacobian row (the negated contact normal).
    j: [f64; 2],
    /// Reference acceleration.
    aref: f64,
    /// Regulariser `R`.
    r: f64,
}

/// MuJoCo's impedance for constraint violation `violation = dist − margin`.
fn impedance(violation: f64) -> f64 {
    let [d0, dwidth, width, mid, power] = SOLIMP;
    let x = (violation / width).abs();
    let imp = if x >= 1.0 {
        dwidth
    } else if x <= 0.0 {
        d0
    } else if power == 1.0 {
        d0 + x * (dwidth - d0)
    } else if x <= mid {
        let a = 1.0 / mid.powf(power - 1.0);
        d0 + a * x.powf(power) * (dwidth - d0)
    } else {
        let b = 1.0 / (1.0 - mid).powf(power - 1.0);
        d0 + (1.0 - b * (1.0 - x).powf(power)) * (dwidth - d0)
    };
    imp.clamp(MINIMP, MAXIMP)
}

/// The ball, as the contact model sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ball {
    /// Centre.
    pub pos: [f64; 2],
    /// Velocity.
    pub vel: [f64; 2],
    /// Radius.
    pub radius: f64,
    /// Mass.
    pub mass: f64,
}

/// The active contacts of `ball` with square blocks of half-size `half` centred at `walls`,
/// for contact distance `margin` and time step `timestep`.
pub(crate) fn rows(ball: &Ball, walls: &[[f64; 2]], half: f64, margin: f64, timestep: f64) -> Vec<Row> {
    let Ball { pos, vel, radius, mass } = *ball;
    let dmax = SOLIMP[1].clamp(MINIMP, MAXIMP);
    let timeconst = SOLREF[0].max(2.0 * timestep);
    let dampratio = SOLREF[1];
    let k = 1.0 / (dmax * dmax * timeconst * timeconst * dampratio * dampratio).max(MINVAL);
    let b = 2.0 / (dmax * timeconst).max(MINVAL);
    let mut out = Vec::new();
    for w in walls {
        // cheap rejection: farther than radius + margin along an axis
        if (pos[0] - w[0]).abs() > half + radius + margin || (pos[1] - w[1]).abs() > half + radius + margin {
            continue;
        }
        let closest = [pos[0].clamp(w[0] - half, w[0] + half), pos[1].clamp(w[1] - half, w[1] + half)];
        let d = [closest[0] - pos[0], closest[1] - pos[1]];
        let len = (d[0] * d[0] + d[1] * d[1]).sqrt();
        let (n, dist) = if len > 0.0 {
            ([d[0] / len, d[1] / len], len - radius)
        } else {
            // centre inside the block: along the axis of least penetration
            let pen = [half - (pos[0] - w[0]).abs(), half - (pos[1] - w[1]).abs()];
            if pen[0] < pen[1] {
                ([if pos[0] >= w[0] { -1.0 } else { 1.0 }, 0.0], -pen[0] - radius)
            } else {
                ([0.0, if pos[1] >= w[1] { -1.0 } else { 1.0 }], -pen[1] - radius)
            }
        };
        if dist >= margin {
            continue;
        }
        let j = [-n[0], -n[1]];
        let imp = impedance(dist - margin);
        let jv = j[0] * vel[0] + j[1] * vel[1];
        let aref = -b * jv - k * imp * (dist - margin);
        let r = ((1.0 - imp) / imp * (1.0 / mass)).max(MINVAL);
        out.push(Row { j, aref, r });
    }
    out
}

/// Solves `(A + R) f = aref − J a0` on the active set `set` (Gaussian elimination with partial
/// pivoting); `None` if singular.
fn solve_set(rows: &[Row], set: &[usize], a0: [f64; 2], inv_mass: f64) -> Option<Vec<f64>> {
    let n = set.len();
    let mut m = vec![vec![0.0; n + 1]; n];
    for (p, &i) in set.iter().enumerate() {
        for (q, &j) in set.iter().enumerate() {
            m[p][q] = (rows[i].j[0] * rows[j].j[0] + rows[i].j[1] * rows[j].j[1]) * inv_mass;
        }
        m[p][p] += rows[i].r;
        m[p][n] = rows[i].aref - (rows[i].j[0] * a0[0] + rows[i].j[1] * a0[1]);
    }
    for c in 0..n {
        let piv = (c..n).max_by(|&a, &b| m[a][c].abs().total_cmp(&m[b][c].abs()))?;
        if m[piv][c].abs() < MINVAL {
            return None;
        }
        m.swap(c, piv);
        let pivot = m[c].clone();
        for (r, row) in m.iter_mut().enumerate() {
            if r != c {
                let factor = row[c] / pivot[c];
                for (x, p) in row.iter_mut().zip(&pivot).skip(c) {
                    *x -= factor * p;
                }
            }
        }
    }
    Some((0..n).map(|i| m[i][n] / m[i][i]).collect())
}

/// The generalised constraint force `Jᵀ f` of the active `rows` for unconstrained acceleration
/// `a0`.
pub(crate) fn constraint_force(rows: &[Row], a0: [f64; 2], inv_mass: f64) -> [f64; 2] {
    let violated = |a: [f64; 2], row: &Row| row.j[0] * a[0] + row.j[1] * a[1] - row.aref < 0.0;
    if !rows.iter().any(|r| violated(a0, r)) {
        return [0.0, 0.0]; // empty active set: no contact pushes
    }
    let k = rows.len();
    if k <= 10 {
        'sets: for mask in 1u32..(1 << k) {
            let set: Vec<usize> = (0..k).filter(|i| mask & (1 << i) != 0).collect();
            let Some(f) = solve_set(rows, &set, a0, inv_mass) else { continue };
            if f.iter().any(|&x| x < 0.0) {
                continue;
            }
            let qfrc = set
                .iter()
                .zip(&f)
                .fold([0.0, 0.0], |acc, (&i, &fi)| [acc[0] + rows[i].j[0] * fi, acc[1] + rows[i].j[1] * fi]);
            let a = [a0[0] + qfrc[0] * inv_mass, a0[1] + qfrc[1] * inv_mass];
            for (i, row) in rows.iter().enumerate() {
                if mask & (1 << i) == 0 && violated(a, row) {
                    continue 'sets;
                }
            }
            return qfrc;
        }
    }
    // Many rows, or rounding left no active set exactly consistent: projected Gauss–Seidel on
    // the same (strictly convex) dual problem.
    gauss_seidel(rows, a0, inv_mass)
}

/// Projected Gauss–Seidel on the dual of the contact problem (200 sweeps).
fn gauss_seidel(rows: &[Row], a0: [f64; 2], inv_mass: f64) -> [f64; 2] {
    let k = rows.len();
    let mut f = vec![0.0; k];
    let mut a = a0;
    for _ in 0..200 {
        for (i, row) in rows.iter().enumerate() {
            let aii = (row.j[0] * row.j[0] + row.j[1] * row.j[1]) * inv_mass + row.r;
            let residual = row.aref - (row.j[0] * a[0] + row.j[1] * a[1]) - row.r * f[i];
            let new = (f[i] + residual / aii).max(0.0);
            let delta = new - f[i];
            f[i] = new;
            a = [a[0] + row.j[0] * delta * inv_mass, a[1] + row.j[1] * delta * inv_mass];
        }
    }
    rows.iter().zip(&f).fold([0.0, 0.0], |acc, (row, fi)| [acc[0] + row.j[0] * fi, acc[1] + row.j[1] * fi])
}

#[cfg(test)]
mod tests {
    use super::*;

    // Values printed by MuJoCo 3.17 (efc_R, efc_aref, efc_force, qfrc_constraint) for the
    // gymnasium-robotics ball at x = 1.3975, v = (2, 0.3), ctrl = (0.5, 0.1) next to the wall
    // block at x ∈ [1.5, 2.5] of the U maze.
    #[test]
    fn one_contact_matches_mujoco() {
        let mass = 4.188790204786391;
        let walls = [[2.0, 1.0]];
        let ball = Ball { pos: [1.3975, 1.0], vel: [2.0, 0.3], radius: 0.1, mass };
        let r = rows(&ball, &walls, 0.5, 0.004, 0.01);
        assert_eq!(r.len(), 1);
        assert!((r[0].r - 0.012564863928307538).abs() < 1e-12);
        assert!((r[0].aref - 214.47368421052624).abs() < 1e-9);
        let a0 = [48.0 / mass, 9.7 / mass];
        let f = constraint_force(&r, a0, 1.0 / mass);
        assert!((f[0] + 899.0660042252215).abs() < 1e-8 && f[1] == 0.0, "{f:?}");
    }

    #[test]
    fn impedance_shape() {
        assert_eq!(impedance(0.0), 0.9);
        assert_eq!(impedance(-0.002), 0.95);
        let mid = impedance(-0.0005);
        assert!((mid - (0.9 + 0.5 * 0.05)).abs() < 1e-12);
        assert!(impedance(-0.0002) < mid && mid < impedance(-0.0008));
    }

    #[test]
    fn corner_contacts_agree_with_gauss_seidel() {
        // a ball pushed into an inner corner touches two blocks
        let mass = 4.188790204786391;
        let walls = [[2.0, 1.0], [1.0, 2.0], [2.0, 2.0]];
        let ball = Ball { pos: [1.3985, 1.3985], vel: [1.0, 1.5], radius: 0.1, mass };
        let r = rows(&ball, &walls, 0.5, 0.004, 0.01);
        assert!(r.len() >= 2, "{r:?}");
        let a0 = [60.0 / mass, 80.0 / mass];
        let exact = constraint_force(&r, a0, 1.0 / mass);
        let iterative = gauss_seidel(&r, a0, 1.0 / mass);
        assert!(exact[0] < 0.0 && exact[1] < 0.0, "{exact:?}");
        for d in 0..2 {
            assert!((exact[d] - iterative[d]).abs() < 1e-6 * exact[d].abs().max(1.0), "{exact:?} {iterative:?}");
        }
    }

    #[test]
    fn separating_ball_feels_no_force() {
        let mass = 4.0;
        let ball = Ball { pos: [1.398, 1.0], vel: [-3.0, 0.0], radius: 0.1, mass };
        let r = rows(&ball, &[[2.0, 1.0]], 0.5, 0.004, 0.01);
        let f = constraint_force(&r, [-5.0, 0.0], 1.0 / mass);
        assert_eq!(f, [0.0, 0.0]);
    }
}
