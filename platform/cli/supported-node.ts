// Imported first by the entry point (ES modules evaluate in import order): refuses an unsupported Node.js with
// a sentence before any other module runs or a database opens.
import { requireSupportedNode } from '../../shared/node-support.js';

requireSupportedNode('charger-platform');
