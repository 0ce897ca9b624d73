import neostandard from 'neostandard'

export default [
  ...neostandard({ ts: true, ignores: ['dist/**', 'coverage/**', 'test-artifacts/**', 'clients/typescript/dist/**', 'clients/typescript/src/generated/**'] }),
  {
    rules: {
      // A TypeBox schema constant and its Static type share one name on purpose; tsc catches real clashes.
      '@typescript-eslint/no-redeclare': 'off'
    }
  }
]
