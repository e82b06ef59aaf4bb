/**
 * Fitting a cost profile to measured failovers by non-negative least squares: the model is linear
 * in its constants (model.ts `costFeatures`), so a set of failovers with known seconds is a linear
 * system A·x ≈ b with x ≥ 0 (a cost cannot be negative).
 *
 * Entry points: `nnls(A, b)` (Lawson–Hanson active set), `fitProfile(observations, spec)`,
 * `flattenFeatures`, `FitObservation`, `FitSpec`, `FitResult`.
 *
 * Constants can be fitted tied in groups (one free value shared by every constant of the group:
 * when the data cannot tell them apart, e.g. PRUNE and VISIBLE always come together), and every
 * constant outside the groups keeps the base profile's value (its contribution is subtracted from
 * the target first). Rows are weighted (e.g. 1/seconds for relative error).
 */
import { assert, fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import type { CostFeatures } from './model.ts';
import { COST_CONSTANT_NAMES, type CostConstantName, type CostProfile } from './profile.ts';

/** Solve the normal equations of the columns in `cols` (Gaussian elimination, partial pivoting). */
function leastSquares(A: number[][], b: number[], cols: number[]): number[] {
  const k = cols.length;
  const M = Array.from({ length: k }, () => new Array<number>(k + 1).fill(0));
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      let s = 0;
      for (let r = 0; r < A.length; r++) s += A[r]![cols[i]!]! * A[r]![cols[j]!]!;
      M[i]![j] = s;
    }
    let s = 0;
    for (let r = 0; r < A.length; r++) s += A[r]![cols[i]!]! * b[r]!;
    M[i]![k] = s;
  }
  for (let c = 0; c < k; c++) {
    let p = c;
    for (let r = c + 1; r < k; r++) if (Math.abs(M[r]![c]!) > Math.abs(M[p]![c]!)) p = r;
    [M[c], M[p]] = [M[p]!, M[c]!];
    const piv = M[c]![c]!;
    if (Math.abs(piv) < 1e-300) continue; // collinear column: leave its coefficient 0
    for (let r = 0; r < k; r++) {
      if (r === c) continue;
      const f = M[r]![c]! / piv;
      if (f !== 0) for (let j = c; j <= k; j++) M[r]![j]! -= f * M[c]![j]!;
    }
  }
  return M.map((row, i) => (Math.abs(row[i]!) < 1e-300 ? 0 : row[k]! / row[i]!));
}

/**
 * Non-negative least squares, min ‖A·x − b‖ subject to x ≥ 0 (Lawson & Hanson 1974, ch. 23).
 * Columns are scaled to unit norm internally; an all-zero column gets 0. Deterministic.
 */
export function nnls(A: number[][], b: number[], maxIter = 500): number[] {
  const m = A.length;
  assert(m === b.length && m > 0, 'INV-FIT-1: A and b must have the same, non-zero number of rows');
  const n = A[0]!.length;
  for (const row of A)
    assert(
      row.length === n && row.every(Number.isFinite),
      'INV-FIT-1: A must be a finite rectangular matrix',
    );
  assert(b.every(Number.isFinite), 'INV-FIT-1: b must be finite');
  const norms = Array.from({ length: n }, (_, j) =>
    Math.sqrt(A.reduce((s, r) => s + r[j]! * r[j]!, 0)),
  );
  const S = A.map((r) => r.map((v, j) => (norms[j]! > 0 ? v / norms[j]! : 0)));
  const x = new Array<number>(n).fill(0);
  const passive = new Array<boolean>(n).fill(false);
  const residual = () => b.map((bi, r) => bi - S[r]!.reduce((s, v, j) => s + v * x[j]!, 0));
  const tol = 1e-12 * Math.max(1, Math.sqrt(b.reduce((s, v) => s + v * v, 0)));
  for (let iter = 0; iter < maxIter; iter++) {
    const res = residual();
    const w = Array.from({ length: n }, (_, j) => S.reduce((s, r, i) => s + r[j]! * res[i]!, 0));
    let best = -1;
    for (let j = 0; j < n; j++)
      if (!passive[j] && norms[j]! > 0 && w[j]! > tol && (best < 0 || w[j]! > w[best]!)) best = j;
    if (best < 0) break;
    passive[best] = true;
    for (let inner = 0; inner < maxIter; inner++) {
      const P = passive.flatMap((p, j) => (p ? [j] : []));
      const z = leastSquares(S, b, P);
      if (z.every((v) => v > 0)) {
        for (const j of x.keys()) x[j] = 0;
        P.forEach((j, i) => (x[j] = z[i]!));
        break;
      }
      // Step back towards the feasible region until a passive coefficient reaches zero.
      let alpha = Infinity;
      P.forEach((j, i) => {
        if (z[i]! <= 0) alpha = Math.min(alpha, x[j]! / (x[j]! - z[i]!));
      });
      P.forEach((j, i) => (x[j] = x[j]! + alpha * (z[i]! - x[j]!)));
      for (const j of P)
        if (x[j]! <= 1e-15) {
          x[j] = 0;
          passive[j] = false;
        }
    }
  }
  return x.map((v, j) => (norms[j]! > 0 ? v / norms[j]! : 0));
}

/** All phases' features summed per constant (the failover's total count per constant). */
export function flattenFeatures(f: CostFeatures): Partial<Record<CostConstantName, number>> {
  const out: Partial<Record<CostConstantName, number>> = {};
  for (const phase of Object.values(f)) {
    for (const [k, n] of Object.entries(phase) as Array<[CostConstantName, number]>)
      out[k] = (out[k] ?? 0) + n;
  }
  return out;
}

export interface FitObservation {
  /** Names the cell in residual reports. */
  label: string;
  features: CostFeatures;
  /** The modeled seconds this failover should have. */
  targetS: number;
  /** Row weight (e.g. 1/targetS for relative error). */
  weight: number;
}

export interface FitGroup {
  name: string;
  /** Constants sharing one fitted value. */
  constants: CostConstantName[];
}

export interface FitSpec {
  /** Constants outside the groups keep these values; cache and poll settings are kept too. */
  base: CostProfile;
  groups: FitGroup[];
  /** The fitted profile's name and description. */
  name: string;
  description: string;
  /** The `source` written on each fitted constant (the group name is appended). */
  source: string;
}

export interface FitResult {
  profile: CostProfile;
  /** Fitted seconds per group. */
  groupSeconds: Record<string, number>;
}

/** Fit the groups' values by weighted NNLS; every other constant stays at the base value. */
export function fitProfile(observations: readonly FitObservation[], spec: FitSpec): FitResult {
  if (observations.length === 0)
    throw new WalsimError('invalid_input', 'fitProfile needs at least one observation');
  const seen = new Set<string>();
  for (const g of spec.groups) {
    for (const c of g.constants) {
      if (!COST_CONSTANT_NAMES.includes(c))
        throw new WalsimError('invalid_input', `fit group "${g.name}": unknown constant "${c}"`);
      if (seen.has(c))
        throw new WalsimError(
          'invalid_input',
          `fit group "${g.name}": constant "${c}" is in two groups`,
        );
      seen.add(c);
    }
  }
  const A: number[][] = [];
  const b: number[] = [];
  for (const o of observations) {
    if (!(Number.isFinite(o.targetS) && o.weight > 0))
      fail(`INV-FIT-2: observation ${o.label} needs a finite target and a positive weight`);
    const f = flattenFeatures(o.features);
    let fixed = 0;
    for (const [k, n] of Object.entries(f) as Array<[CostConstantName, number]>)
      if (!seen.has(k)) fixed += n * spec.base.constants[k].seconds;
    A.push(spec.groups.map((g) => o.weight * g.constants.reduce((s, c) => s + (f[c] ?? 0), 0)));
    b.push(o.weight * (o.targetS - fixed));
  }
  const x = nnls(A, b);
  const constants = { ...spec.base.constants };
  const groupSeconds: Record<string, number> = {};
  spec.groups.forEach((g, i) => {
    groupSeconds[g.name] = x[i]!;
    for (const c of g.constants)
      constants[c] = {
        ...constants[c],
        seconds: x[i]!,
        source: `${spec.source} (group ${g.name})`,
      };
  });
  return {
    profile: { ...spec.base, name: spec.name, description: spec.description, constants },
    groupSeconds,
  };
}

/** Numerical rank of a matrix (rows × columns), columns scaled to unit norm, modified Gram–Schmidt. */
export function matrixRank(A: readonly (readonly number[])[], relTol = 1e-9): number {
  const m = A.length;
  const n = m === 0 ? 0 : A[0]!.length;
  const cols: number[][] = [];
  for (let j = 0; j < n; j++) {
    const c = A.map((row) => row[j]!);
    const norm = Math.hypot(...c);
    if (norm > 0) cols.push(c.map((v) => v / norm));
  }
  const basis: number[][] = [];
  for (const c of cols) {
    const v = [...c];
    for (const q of basis) {
      const d = v.reduce((s, x, i) => s + x * q[i]!, 0);
      for (let i = 0; i < m; i++) v[i]! -= d * q[i]!;
    }
    const r = Math.hypot(...v);
    if (r > relTol) basis.push(v.map((x) => x / r));
  }
  return basis.length;
}

/**
 * The groups a set of cells cannot identify: group j is identified only if its column of the grouped
 * design matrix (each cell's count summed over the group's constants) is not a linear combination
 * of the other groups' columns, i.e. removing it lowers the rank. A calibration whose cells leave a
 * group unidentified would let least squares put that group's cost anywhere along the degenerate
 * direction (seed 001's pg_control updates, always one per table like the smgr operations).
 */
export function unidentifiedGroups(
  features: readonly CostFeatures[],
  groups: readonly FitGroup[],
): string[] {
  const A = features.map((f) => {
    const flat = flattenFeatures(f);
    return groups.map((g) => g.constants.reduce((s, c) => s + (flat[c] ?? 0), 0));
  });
  const full = matrixRank(A);
  return groups
    .filter((_, j) => matrixRank(A.map((row) => row.filter((_, k) => k !== j))) === full)
    .map((g) => g.name);
}
