/** A charger's configuration as it last reported it (DESIGN.md §20): every key it runs with, and when. */
export interface StoredConfiguration {
  values: Record<string, string | number | boolean>;
  /** The report's own timestamp (the charger's clock), epoch ms. */
  reported_at_ms: number;
}

/** Chargers' reported configurations, one per device. */
export interface ConfigurationRepository {
  /**
   * Keeps `configuration` unless the device's stored one was reported at the same instant or later (reports
   * arrive late and out of order: the newest wins). True when it was kept.
   */
  recordConfiguration(deviceId: string, configuration: StoredConfiguration): Promise<boolean>;
  getConfiguration(deviceId: string): Promise<StoredConfiguration | undefined>;
}
