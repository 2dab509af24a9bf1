// Lint rules for the whole tree. Type-aware rules catch what matters most in a
// Node server: promises nobody awaits or handles (no-floating-promises) and
// promises handed to places that expect a plain callback (no-misused-promises).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';
import comments from '@eslint-community/eslint-plugin-eslint-comments/configs';

/**
 * The upper floors (apps, the lock cell, the libs the apps share): no file
 * over 500 lines, so each holds one concept (docs/decisions/0018-package-layers.md).
 */
const UPPER_FLOORS = [
  'apps/**/*.ts',
  'libs/cell/**/*.ts',
  'libs/contract/**/*.ts',
  'libs/group/**/*.ts',
  'libs/peer-transport/**/*.ts',
  'libs/routing/**/*.ts',
  'libs/service/**/*.ts',
  'libs/dashboard-ui/**/*.{ts,tsx}',
];

export default tseslint.config(
  {
    ignores: [
      '**/node_modules/**',
      '**/dist/**',
      '**/out-tsc/**',
      '**/.nx/**',
      '.reports/**',
      '.fencer/**',
      'libs/protocol/src/gen/**',
      'libs/contract/src/gen/**',
      '**/*.d.mts',
      '**/vite.config.*.timestamp*',
    ],
  },
  js.configs.recommended,
  {
    files: ['**/*.ts', '**/*.tsx'],
    extends: [tseslint.configs.recommended],
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/await-thenable': 'error',
      // A `let` assigned once after a closure that reads it (wiring a transport into the node it serves) is not a const.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // An eslint-disable comment must say why: `// eslint-disable-next-line rule -- reason`.
    ...comments.recommended,
    rules: { ...comments.recommended.rules, '@eslint-community/eslint-comments/require-description': ['error', { ignore: [] }] },
  },
  {
    // Functions of at most a screen in product code (tests are exempt: a table of cases is long and flat).
    files: ['libs/*/src/**/*.ts', 'apps/*/src/**/*.ts', 'libs/dashboard-ui/web/**/*.{ts,tsx}'],
    ignores: ['**/*.spec.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }] },
  },
  {
    files: UPPER_FLOORS,
    rules: { 'max-lines': ['error', { max: 500, skipBlankLines: false, skipComments: false }] },
  },
  {
    files: ['**/*.mjs', '**/*.js'],
    languageOptions: { globals: { ...globals.node } },
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
);
