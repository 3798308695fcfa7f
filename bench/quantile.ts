/**
 * The `fraction` quantile of ascending `sorted` values by nearest rank (the p99 of 200 samples is the 198th
 * smallest), `NaN` when there are none. Every figure of the bench is read this way.
 */
export function nearestRank(sorted: ArrayLike<number>, fraction: number): number {
  return sorted.length === 0 ? Number.NaN : sorted[Math.max(0, Math.ceil(fraction * sorted.length) - 1)]!
}
