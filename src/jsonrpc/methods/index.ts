import type { MethodDefinition } from '../define-method.js'
import { eth_accounts } from './eth_accounts.js'
import { eth_blockNumber } from './eth_blockNumber.js'
import { eth_call } from './eth_call.js'
import { eth_chainId } from './eth_chainId.js'
import { eth_createAccessList } from './eth_createAccessList.js'
import { eth_estimateGas } from './eth_estimateGas.js'
import { eth_getBalance } from './eth_getBalance.js'
import { eth_getBlockByHash } from './eth_getBlockByHash.js'
import { eth_getBlockByNumber } from './eth_getBlockByNumber.js'
import { eth_getBlockTransactionCountByHash } from './eth_getBlockTransactionCountByHash.js'
import { eth_getBlockTransactionCountByNumber } from './eth_getBlockTransactionCountByNumber.js'
import { eth_getTransactionByBlockHashAndIndex } from './eth_getTransactionByBlockHashAndIndex.js'
import { eth_getTransactionByBlockNumberAndIndex } from './eth_getTransactionByBlockNumberAndIndex.js'
import { eth_getUncleByBlockHashAndIndex } from './eth_getUncleByBlockHashAndIndex.js'
import { eth_getUncleByBlockNumberAndIndex } from './eth_getUncleByBlockNumberAndIndex.js'
import { eth_getUncleCountByBlockHash } from './eth_getUncleCountByBlockHash.js'
import { eth_getUncleCountByBlockNumber } from './eth_getUncleCountByBlockNumber.js'
import { eth_getBlockReceipts } from './eth_getBlockReceipts.js'
import { eth_getLogs } from './eth_getLogs.js'
import { eth_uninstallFilter } from './eth_uninstallFilter.js'
import { eth_newPendingTransactionFilter } from './eth_newPendingTransactionFilter.js'
import { eth_newFilter } from './eth_newFilter.js'
import { eth_newBlockFilter } from './eth_newBlockFilter.js'
import { eth_getFilterLogs } from './eth_getFilterLogs.js'
import { eth_getFilterChanges } from './eth_getFilterChanges.js'
import { eth_getTransactionByHash } from './eth_getTransactionByHash.js'
import { eth_getTransactionCount } from './eth_getTransactionCount.js'
import { eth_getTransactionReceipt } from './eth_getTransactionReceipt.js'
import { eth_sendRawTransaction } from './eth_sendRawTransaction.js'
import { eth_sendRawTransactionSync } from './eth_sendRawTransactionSync.js'
import { eth_getRawTransactionByHash } from './eth_getRawTransactionByHash.js'
import { eth_syncing } from './eth_syncing.js'
import { net_version } from './net_version.js'
import { web3_clientVersion } from './web3_clientVersion.js'

/** Every method the index answers, by name. */
export const methods: Record<string, MethodDefinition> = {
  eth_accounts,
  eth_blockNumber,
  eth_call,
  eth_chainId,
  eth_createAccessList,
  eth_estimateGas,
  eth_getBalance,
  eth_getBlockByHash,
  eth_getBlockByNumber,
  eth_getBlockTransactionCountByHash,
  eth_getBlockTransactionCountByNumber,
  eth_getTransactionByBlockHashAndIndex,
  eth_getTransactionByBlockNumberAndIndex,
  eth_getUncleCountByBlockHash,
  eth_getUncleCountByBlockNumber,
  eth_getUncleByBlockHashAndIndex,
  eth_getUncleByBlockNumberAndIndex,
  eth_getBlockReceipts,
  eth_getLogs,
  eth_uninstallFilter,
  eth_newPendingTransactionFilter,
  eth_newFilter,
  eth_newBlockFilter,
  eth_getFilterLogs,
  eth_getFilterChanges,
  eth_getRawTransactionByHash,
  eth_syncing,
  eth_getTransactionByHash,
  eth_getTransactionCount,
  eth_getTransactionReceipt,
  eth_sendRawTransaction,
  eth_sendRawTransactionSync,
  net_version,
  web3_clientVersion,
}
