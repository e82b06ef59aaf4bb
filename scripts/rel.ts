/** `npm run rel -- <step> [--size NB/512] [--dir .walsim] [--json]`: seed 001's rel.sh (one relation). */
import { stepMain } from './experiment/step-cli.ts';

stepMain('rel');
