/**
 * Branded identifiers: numbers and strings that must not be mixed up
 * (a term is not a log index, a node id is not a session id). The brand
 * exists only for the type checker; at run time these are plain values.
 */
declare const brand: unique symbol;
export type Brand<T, B extends string> = T & { readonly [brand]: B };

export type Term = Brand<number, 'Term'>;
export type LogIndex = Brand<number, 'LogIndex'>;
export type Revision = Brand<number, 'Revision'>;
export type NodeId = Brand<string, 'NodeId'>;
export type SessionId = Brand<string, 'SessionId'>;
export type RequestId = Brand<string, 'RequestId'>;
export type Namespace = Brand<string, 'Namespace'>;
export type CellId = Brand<string, 'CellId'>;

export const Term = (n: number): Term => n as Term;
export const LogIndex = (n: number): LogIndex => n as LogIndex;
export const Revision = (n: number): Revision => n as Revision;
export const NodeId = (s: string): NodeId => s as NodeId;
export const SessionId = (s: string): SessionId => s as SessionId;
export const RequestId = (s: string): RequestId => s as RequestId;
export const Namespace = (s: string): Namespace => s as Namespace;
export const CellId = (s: string): CellId => s as CellId;
