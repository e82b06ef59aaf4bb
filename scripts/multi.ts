/** `npm run multi -- <step> [--tables 1000] [--dir .walsim] [--json]`: seed 001's test.sh (one-block relations). */
import { stepMain } from './experiment/step-cli.ts';

stepMain('multi');
