/**
 * uPlot, the charts' library: its IIFE build is loaded by index.html before this bundle and
 * defines the global `uPlot` (served from node_modules, not bundled); its types are the package's.
 */
import type UPlotClass from 'uplot';

export type UPlot = UPlotClass;
export type UPlotOptions = UPlotClass.Options;
export type UPlotData = UPlotClass.AlignedData;

export const UPlot: typeof UPlotClass = (globalThis as unknown as { uPlot: typeof UPlotClass })
  .uPlot;
