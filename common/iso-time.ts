/**
 * `new Date(ms).toISOString()` without the Date: the same text (YYYY-MM-DDTHH:mm:ss.sssZ) for
 * every time in years 0000–9999, at about a third of the cost. The control file and the data
 * image header carry their write time and are written many times a simulated second (each
 * checkpoint, each state change); the Date and V8's formatter were half a percent of a run.
 * Outside that range it is toISOString itself (extended years, and its RangeError).
 */
const MS_PER_DAY = 86_400_000;
/** 0000-01-01T00:00:00.000Z and 10000-01-01T00:00:00.000Z. */
const MIN_MS = -62_167_219_200_000;
const END_MS = 253_402_300_800_000;

const two = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

export function isoTimestamp(ms: number): string {
  if (!(Number.isInteger(ms) && ms >= MIN_MS && ms < END_MS)) return new Date(ms).toISOString();
  const days = Math.floor(ms / MS_PER_DAY);
  let rem = ms - days * MS_PER_DAY;
  // Civil date of a day count (Howard Hinnant's days_from_civil, inverted): eras of 400 years.
  const z = days + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor(
    (doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365,
  );
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const h = Math.floor(rem / 3_600_000);
  rem -= h * 3_600_000;
  const mi = Math.floor(rem / 60_000);
  rem -= mi * 60_000;
  const s = Math.floor(rem / 1000);
  const f = rem - s * 1000;
  const yyyy = year < 1000 ? String(year).padStart(4, '0') : String(year);
  const sss = f < 10 ? `00${f}` : f < 100 ? `0${f}` : `${f}`;
  return `${yyyy}-${two(month)}-${two(day)}T${two(h)}:${two(mi)}:${two(s)}.${sss}Z`;
}
