// undici's internal modules have no declarations of their own; undici-parts.ts gives them undici's public types.
declare module 'undici/lib/dispatcher/agent.js' {
  const Agent: unknown;
  export default Agent;
}
declare module 'undici/lib/global.js' {
  const globals: unknown;
  export default globals;
}
