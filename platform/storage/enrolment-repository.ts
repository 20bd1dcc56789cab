/**
 * Enrolment groups (DESIGN.md §18): an OEM's CA that vouches for chargers. A charger whose TLS client
 * certificate chains to an active group's CA may register under `--registration attested`; it joins the group's
 * operator, and its site when the group names one.
 */
export interface EnrolmentRow {
  enrolment_id: string;
  operator_id: string;
  site_id: string | null;
  name: string;
  /** The group's CA certificate, PEM. */
  ca_pem: string;
  /** SHA-256 of the CA's DER, upper-case hex pairs joined by colons (Node's `X509Certificate.fingerprint256`). */
  ca_fingerprint: string;
  status: 'active' | 'revoked';
  created_ms: number;
}

export type NewEnrolment = Pick<
  EnrolmentRow,
  'operator_id' | 'site_id' | 'name' | 'ca_pem' | 'ca_fingerprint'
>;

export interface EnrolmentRepository {
  /**
   * Adds an active group. `'duplicate_ca'` when an active group already has this CA: a charger's certificate
   * must lead to one operator only.
   */
  createEnrolment(input: NewEnrolment): Promise<EnrolmentRow | 'duplicate_ca'>;
  /** Every group, oldest first. */
  listEnrolments(): Promise<EnrolmentRow[]>;
  /** The active groups, oldest first: what registration checks a certificate against. */
  activeEnrolments(): Promise<EnrolmentRow[]>;
  getEnrolment(enrolmentId: string): Promise<EnrolmentRow | undefined>;
  /** Marks the group revoked (no new registrations through it); false when there is no such group. */
  revokeEnrolment(enrolmentId: string): Promise<boolean>;
}
