/**
 * Goal: infra/Dockerfile builds the image the manifests run, as the issue
 * asks: multi-stage (a build stage and a runtime stage that copies only
 * built files from it), non-root (the runtime stage ends as the numeric
 * user the manifests' securityContext names, and never switches to root),
 * on the Node major the repository runs on; the build stage builds exactly
 * the four apps whose entry points the manifests run, and those apps exist
 * with a main.ts; every port the manifests use is exposed; .dockerignore
 * keeps installs, builds and history out of the context. No Docker engine
 * runs here, so the file is parsed (npm dockerfile-ast), not built; the
 * image's size is not measured.
 * Method: the parsed instructions compared with the generator's constants
 * (MAIN, PORTS, RUN_AS_ID) and the repository's folders.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Copy, DockerfileParser, type Instruction } from 'dockerfile-ast';
import { describe, expect, it } from 'vitest';
import { MAIN, PORTS, RUN_AS_ID } from '../src/index.js';
import { root } from './support.js';

const dockerfile = DockerfileParser.parse(readFileSync(path.join(root, 'infra/Dockerfile'), 'utf8'));
const froms = dockerfile.getFROMs();
const instructions = dockerfile.getInstructions();
const keyword = (i: Instruction) => i.getKeyword();
/** The instructions of the last stage (after its FROM). */
const lastStage = instructions.slice(instructions.indexOf(froms[froms.length - 1]!) + 1);

describe('infra/Dockerfile', () => {
  it('has a build stage and a runtime stage on the repository’s Node major', () => {
    expect(froms.map((f) => f.getBuildStage())).toEqual(['build', 'runtime']);
    const major = /(\d+)/.exec(JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).engines.node)![1];
    for (const f of froms) expect(f.getImage()).toMatch(new RegExp(`^node:${major}-`));
  });

  it('the runtime stage copies only built files from the build stage', () => {
    const copies = lastStage.filter((i) => keyword(i) === 'COPY' || keyword(i) === 'ADD');
    expect(copies.length).toBeGreaterThan(0);
    for (const c of copies) {
      expect(c).toBeInstanceOf(Copy);
      const from = (c as Copy).getFlags().find((f) => f.getName() === 'from');
      expect(from?.getValue(), c.getTextContent()).toBe('build');
    }
  });

  it('runs as the non-root user the manifests name, and never as root', () => {
    const users = lastStage.filter((i) => keyword(i) === 'USER').map((i) => i.getArgumentsContent()?.trim());
    expect(users).toEqual([`${RUN_AS_ID}:${RUN_AS_ID}`]);
    const userAt = lastStage.findIndex((i) => keyword(i) === 'USER');
    // Nothing after USER needs privileges: no RUN (it would run as the user anyway, but a root step means a writable layer).
    expect(lastStage.slice(userAt).filter((i) => keyword(i) === 'RUN')).toEqual([]);
    expect(lastStage.find((i) => keyword(i) === 'RUN')!.getArgumentsContent()).toContain(`--uid ${RUN_AS_ID}`);
  });

  it('builds exactly the four apps the manifests run, which exist', () => {
    const build = instructions.find((i) => keyword(i) === 'RUN')!.getArgumentsContent()!;
    const projects = /run-many -t build -p ([\w\s-]+?)\s+&&/.exec(build)![1]!.trim().split(/\s+/).sort();
    const apps = Object.values(MAIN).map((m) => /^\/app\/apps\/([\w-]+)\/dist\/main\.js$/.exec(m)![1]!);
    expect(projects).toEqual([...apps].sort());
    for (const app of apps) expect(existsSync(path.join(root, 'apps', app, 'src/main.ts')), app).toBe(true);
  });

  it('exposes every port the manifests use', () => {
    const exposed = lastStage.filter((i) => keyword(i) === 'EXPOSE').flatMap((i) => i.getArguments().map((a) => Number(a.getValue())));
    expect(new Set(exposed)).toEqual(new Set(Object.values(PORTS)));
  });

  it('.dockerignore keeps node_modules, dist and .git out of the context', () => {
    const ignored = readFileSync(path.join(root, '.dockerignore'), 'utf8').split('\n');
    for (const p of ['**/node_modules', '**/dist', '.git']) expect(ignored).toContain(p);
  });
});
