export * from './access-tokens.js';
export * from './authenticate.js';
