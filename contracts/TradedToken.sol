// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";

import {ITradedToken} from "./interfaces/ITradedToken.sol";

/**
 * @title TradedToken
 * @notice The ERC-20 token (18 decimals) that the service trades against stable coins.
 * Only the minter (the swap) or the owner can mint or burn.
 *
 * @dev Spending an allowance through {transferFrom} emits {Approval} with the remaining
 * allowance, as ERC-20 tokens did before OpenZeppelin v5 made it optional. Indexers and the
 * service's allowance manager can then follow allowances from logs alone. An infinite
 * allowance (`type(uint256).max`) is never decremented and so emits nothing.
 */
contract TradedToken is ERC20, Ownable, ITradedToken {
    address private _minter;

    /// @notice `account` is neither the minter nor the owner.
    error TokenUnauthorizedMinter(address account);

    /// @notice The minter changed from `previousMinter` to `newMinter`.
    event MinterUpdated(address indexed previousMinter, address indexed newMinter);

    /**
     * @param name_ Token name.
     * @param symbol_ Token symbol, reported by the service as `cryptoCurrency`.
     * @param initialOwner Account that administers the token.
     */
    constructor(string memory name_, string memory symbol_, address initialOwner)
        ERC20(name_, symbol_)
        Ownable(initialOwner)
    {}

    modifier onlyMinterOrOwner() {
        if (msg.sender != _minter && msg.sender != owner()) revert TokenUnauthorizedMinter(msg.sender);
        _;
    }

    /// @notice The account allowed to mint and burn besides the owner.
    function minter() external view returns (address) {
        return _minter;
    }

    /**
     * @notice Sets the minter (normally the swap). Owner only.
     * @dev Emits {MinterUpdated}.
     */
    function setMinter(address newMinter) external onlyOwner {
        address previous = _minter;
        _minter = newMinter;
        emit MinterUpdated(previous, newMinter);
    }

    /**
     * @inheritdoc ITradedToken
     * @dev Minter or owner only. Emits one {IERC20-Transfer} from the zero address.
     */
    function mint(address to, uint256 value) external onlyMinterOrOwner {
        _mint(to, value);
    }

    /**
     * @inheritdoc ITradedToken
     * @dev Minter or owner only. Emits one {IERC20-Transfer} to the zero address.
     */
    function burn(uint256 value) external onlyMinterOrOwner {
        _burn(msg.sender, value);
    }

    /// @dev Always emit {Approval}, including when {transferFrom} spends an allowance.
    function _approve(address owner, address spender, uint256 value, bool) internal override {
        super._approve(owner, spender, value, true);
    }
}
