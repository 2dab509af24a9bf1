/** What one published package is made of (see pack.mjs). */
export interface PackageSpec {
  /** The npm name, as users install it. */
  name: string;
  /** Its workspace folder, relative to the repository. */
  dir: string;
  /** Entry name -> compiled file in `dir` (bundled to dist/<entry>.js). */
  entries: Record<string, string>;
  /** Public subpath -> entry name (each gets dist/<entry>.d.ts). */
  exports: Record<string, string>;
  bin?: Record<string, string>;
}
export interface PackedPackage {
  name: string;
  /** The built package folder (what the tarball holds). */
  dir: string;
  tarball: string;
}
export declare const ROOT: string;
export declare const NODE_ENGINE: string;
export declare const PACKAGES: PackageSpec[];
export declare function packageNameOf(specifier: string): string;
export declare function publishedManifest(
  spec: PackageSpec,
  source: { version: string; description: string },
  dependencies: Record<string, string>,
): Record<string, unknown>;
export declare function buildPackage(spec: PackageSpec, outDir: string): Promise<string>;
/** process.env without the npm_* settings an enclosing npm passes down. */
export declare function cleanNpmEnv(env?: NodeJS.ProcessEnv): Record<string, string>;
export declare function npmPack(dir: string, destination: string): string;
export declare function packAll(outDir: string): Promise<PackedPackage[]>;
