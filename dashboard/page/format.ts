/** Formatting of LSNs, bytes, seconds and counts for the page. */

/** 'X/Y' → number (exact below 2^53); null for anything else. */
export function lsnNum(lsn: string | null | undefined): number | null {
  if (typeof lsn !== 'string') return null;
  const m = /^([0-9A-Fa-f]+)\/([0-9A-Fa-f]+)$/.exec(lsn);
  return m ? parseInt(m[1]!, 16) * 2 ** 32 + parseInt(m[2]!, 16) : null;
}

export function fmtLsn(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return '';
  const hi = Math.floor(n / 2 ** 32);
  const lo = n - hi * 2 ** 32;
  return `${hi.toString(16).toUpperCase()}/${Math.round(lo).toString(16).toUpperCase()}`;
}

export function fmtBytes(n: number | null | undefined): string | null {
  if (n === null || n === undefined) return null;
  const u = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${u[i]}`;
}

export const fmtS = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '—' : `${(ms / 1000).toFixed(3)} s`;

export const fmtInt = (n: number | null | undefined): string =>
  n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US');
