import type { FastifyRequest } from 'fastify';
import type { OperatorPrincipal } from '../../services/principal.js';

/** The scopes operator routes ask for. */
export const read = { kind: 'operator', scope: 'read' } as const;
export const write = { kind: 'operator', scope: 'write' } as const;

/** The caller of an operator route: authentication has run before any handler. */
export const principal = (request: FastifyRequest): OperatorPrincipal => request.operator!;
