// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {AccessControlDefaultAdminRules} from
    "@openzeppelin/contracts/access/extensions/AccessControlDefaultAdminRules.sol";

import {ITradedToken} from "./interfaces/ITradedToken.sol";

/**
 * @title TradedToken
 * @notice The ERC-20 token (18 decimals) that the service trades against stable coins.
 * Only holders of {MINTER_ROLE} (the swap) can mint or burn.
 *
 * @dev Access control, as OpenZeppelin's guidelines have it:
 * - `DEFAULT_ADMIN_ROLE`, held by one account ({AccessControlDefaultAdminRules}): grants and
 *   revokes {MINTER_ROLE}. It is handed over in two steps, {beginDefaultAdminTransfer} then
 *   {acceptDefaultAdminTransfer} by the new admin once the admin delay has passed: the role-based
 *   counterpart of `Ownable2Step`. {owner} (ERC-5313) names the admin. The admin cannot mint
 *   unless it grants itself {MINTER_ROLE}, which leaves a {RoleGranted} log.
 * - {MINTER_ROLE}: {mint}, and {burn} of the caller's own tokens. The deployment grants it to
 *   the swap, which mints on a buy and burns what it receives on a sell. Checking the role reads
 *   storage only: trades emit no more logs than the `Transfer` of the mint or burn.
 *
 * Spending an allowance through {transferFrom} emits {Approval} with the remaining
 * allowance, as ERC-20 tokens did before OpenZeppelin v5 made it optional. Indexers and the
 * service's allowance manager can then follow allowances from logs alone. An infinite
 * allowance (`type(uint256).max`) is never decremented and so emits nothing.
 */
contract TradedToken is ERC20, AccessControlDefaultAdminRules, ITradedToken {
    /// @notice The role allowed to mint, and to burn its own tokens.
    bytes32 public constant MINTER_ROLE = keccak256("MINTER_ROLE");

    /**
     * @notice Deploys the token, with no supply and no minter: the admin grants {MINTER_ROLE} to the swap.
     * @param name_ Token name.
     * @param symbol_ Token symbol, reported by the service as `cryptoCurrency`.
     * @param initialAdminDelay Seconds a new admin must wait before accepting the role (see {defaultAdminDelay}).
     * @param initialAdmin The admin (`DEFAULT_ADMIN_ROLE`).
     */
    constructor(
        string memory name_,
        string memory symbol_,
        uint48 initialAdminDelay,
        address initialAdmin
    ) ERC20(name_, symbol_) AccessControlDefaultAdminRules(initialAdminDelay, initialAdmin) {}

    /**
     * @inheritdoc ITradedToken
     * @dev Requires {MINTER_ROLE}. Emits one {IERC20-Transfer} from the zero address.
     */
    function mint(address to, uint256 value) external onlyRole(MINTER_ROLE) {
        _mint(to, value);
    }

    /**
     * @inheritdoc ITradedToken
     * @dev Requires {MINTER_ROLE}. Emits one {IERC20-Transfer} to the zero address.
     */
    function burn(uint256 value) external onlyRole(MINTER_ROLE) {
        _burn(msg.sender, value);
    }

    /// @dev Always emit {Approval}, including when {transferFrom} spends an allowance.
    function _approve(address holder, address spender, uint256 value, bool) internal override {
        super._approve(holder, spender, value, true);
    }
}
